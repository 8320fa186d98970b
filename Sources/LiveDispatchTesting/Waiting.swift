import Foundation
import LiveDispatchCore

/// A condition that did not hold before its deadline.
public struct WaitTimeout: Error, CustomStringConvertible {
    public var what: String
    /// How long the wait lasted, when it was a wait with a deadline.
    public var timeout: Duration?
    public var description: String {
        guard let timeout else { return "timed out waiting for \(what)" }
        return "timed out after \(timeout.seconds) s waiting for \(what)"
    }

    public init(what: String, timeout: Duration? = nil) {
        self.what = what
        self.timeout = timeout
    }
}

/// Polls `condition` until it returns a value or `timeout` passes. Polling
/// backs off from 5 ms to `longestPause`; tests and benchmarks wait this
/// way, never a fixed time.
@discardableResult
public func waitFor<T>(
    _ what: String, timeout: Duration = .seconds(60), longestPause: Duration = .milliseconds(100),
    condition: () async throws -> T?
) async throws -> T {
    let clock = ContinuousClock()
    let deadline = clock.now.advanced(by: timeout)
    var interval = min(Duration.milliseconds(5), longestPause)
    while true {
        if let value = try await condition() { return value }
        if clock.now >= deadline { throw WaitTimeout(what: what, timeout: timeout) }
        await pollPause(interval)
        interval = min(interval * 2, longestPause)
    }
}

/// Polls `condition` until it holds or `timeout` passes, as
/// ``waitFor(_:timeout:longestPause:condition:)``; throws ``WaitTimeout``
/// when it never held.
public func waitUntil(
    _ what: String, timeout: Duration = .seconds(60), longestPause: Duration = .milliseconds(100),
    _ condition: () async throws -> Bool
) async throws {
    try await waitFor(what, timeout: timeout, longestPause: longestPause) { try await condition() ? () : nil }
}

/// Polls `condition` until it holds or `timeout` seconds pass; returns
/// whether it held (for `#expect(await eventually { … })`).
public func eventually(timeout: Double = 30, _ condition: () async throws -> Bool) async rethrows -> Bool {
    let clock = ContinuousClock()
    let deadline = clock.now.advanced(by: .milliseconds(Int64((timeout * 1000).rounded())))
    var interval = Duration.milliseconds(5)
    while clock.now < deadline {
        if try await condition() { return true }
        await pollPause(interval)
        interval = min(interval * 2, .milliseconds(100))
    }
    return try await condition()
}

/// The pause between two polls of a condition.
private func pollPause(_ interval: Duration) async {
    let nanoseconds = interval.nanoseconds
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
        DispatchQueue.global().asyncAfter(deadline: .now() + .nanoseconds(Int(nanoseconds))) { // not from a Double: Int64 nanoseconds
            continuation.resume()
        }
    }
}
