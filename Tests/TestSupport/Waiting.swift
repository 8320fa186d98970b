import Foundation

/// A condition that did not hold before its deadline.
public struct WaitTimeout: Error, CustomStringConvertible {
    public var what: String
    public var description: String { "timed out waiting for \(what)" }

    public init(what: String) { self.what = what }
}

/// Polls `condition` until it returns a value or `timeout` passes. Polling
/// backs off from 5 ms to 100 ms; tests wait this way, never a fixed time.
@discardableResult
public func waitFor<T>(
    _ what: String, timeout: Duration = .seconds(60), condition: () async throws -> T?
) async throws -> T {
    let clock = ContinuousClock()
    let deadline = clock.now.advanced(by: timeout)
    var interval = Duration.milliseconds(5)
    while true {
        if let value = try await condition() { return value }
        if clock.now >= deadline { throw WaitTimeout(what: what) }
        await pollPause(interval)
        interval = min(interval * 2, .milliseconds(100))
    }
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
    let nanoseconds = interval.components.seconds * 1_000_000_000 + interval.components.attoseconds / 1_000_000_000
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
        DispatchQueue.global().asyncAfter(deadline: .now() + .nanoseconds(Int(nanoseconds))) {
            continuation.resume()
        }
    }
}
