import ArgumentParser
import Foundation
import LiveDispatchCore
import LiveDispatchTesting
import Synchronization

/// `livedispatch-bench http-attack`: probes a running worker's HTTP server
/// as an attacker would and prints one row per probe.
struct BenchHTTPAttackCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "http-attack",
        abstract: "Probe a worker's HTTP server as an attacker would; one row per probe, exit 1 when one fails.",
        discussion: """
            Reads the routes from the server's own /v1/openapi.json, then tries every route without a key, \
            with an unknown key and with a key of each other scope; 26 or 27 spellings of each route's path without \
            a key; a keyless read with a rebound Host; bodies without Content-Type, with duplicate keys, \
            with a content state over APNs' size, over http.max_body_bytes, with broken chunked framing; \
            oversized heads; an id carrying a script; a head that never ends (closed after \
            http.header_timeout); --idle-connections idle sockets while /healthz is timed (on the probe \
            listener when --probe-port is given: it must answer within 100 ms); Expect: 100-continue without a key \
            (401 at once); --slow-bodies keyless 255 KB bodies sent slowly while the worker's memory is read \
            (with --worker-pid: it must stay within 20 MB); --half-open sockets sending half a head, reopened as \
            they close, and --fairness-idle idle ones, all from --attacker-address, while a client on the \
            server's host times GET /healthz and an authorized update (p99 within --within-ms); and, last, \
            the ingest key's rate limit. Give the keys of a server configured with them (one scope each).
            """
    )

    @Option(help: "The server's host.") var host = "127.0.0.1"
    @Option(help: "The server's port (admin.listen).") var port: Int
    @Option(name: .customLong("probe-port"), help: "The probe listener's port (admin.probe_listen), if any.") var probePort: Int?
    @Option(name: .customLong("ingest-key"), help: "A key with the ingest scope only.") var ingestKey: String
    @Option(name: .customLong("read-key"), help: "A key with the read scope only.") var readKey: String
    @Option(name: .customLong("admin-key"), help: "A key with the admin scope only.") var adminKey: String
    @Option(name: .customLong("idle-connections"), help: "Idle connections held open while /healthz is timed.") var idleConnections = 2000
    @Option(name: .customLong("header-timeout"), help: "The server's http.header_timeout, in seconds.") var headerTimeout = 10.0
    @Option(name: .customLong("rate-burst"), help: "The server's http.rate_burst.") var rateBurst = 200
    @Option(name: .customLong("max-body-bytes"), help: "The server's http.max_body_bytes.") var maxBodyBytes = 262_144
    @Option(name: .customLong("attacker-address"), help: "The loopback address the fairness attack comes from.") var attackerAddress = "127.0.0.2"
    @Option(name: .customLong("half-open"), help: "Sockets sending half a head, reopened as they close, in the fairness probe.") var halfOpen = 1000
    @Option(name: .customLong("fairness-idle"), help: "Idle sockets beside them in the fairness probe.") var fairnessIdle = 1500
    @Option(name: .customLong("tries"), help: "Requests per route timed by the honest client of the fairness probe.") var tries = 100
    @Option(name: .customLong("within-ms"), help: "The fairness probe's bound on the honest client's 99th percentile, in ms.") var withinMilliseconds = 200.0
    @Option(name: .customLong("slow-bodies"), help: "Keyless slow bodies sent while the worker's memory is watched.") var slowBodies = 500
    @Option(name: .customLong("worker-pid"), help: "The worker's process id, to read its memory (the slow-body probe needs it).") var workerPID: Int32?

    struct Row {
        var probe: String
        var expected: String
        var got: String
        var passed: Bool
    }

    func run() async throws {
        var rows: [Row] = []
        func row(_ probe: String, expected: String, got: String, _ passed: Bool) {
            let row = Row(probe: probe, expected: expected, got: got, passed: passed)
            rows.append(row)
            print(Self.format(row))
        }
        func record(_ more: [Row]) {
            for one in more { row(one.probe, expected: one.expected, got: one.got, one.passed) }
        }
        print(Self.format(Row(probe: "probe", expected: "expected", got: "got", passed: true)).replacingOccurrences(of: " ok", with: " verdict"))

        let document = try JSONValue.parse(send("GET", "/v1/openapi.json").body)
        let routes = Self.routes(document)
        guard !routes.isEmpty else { throw ValidationError("the server's /v1/openapi.json lists no routes") }
        let keys = ["ingest": ingestKey, "read": readKey, "admin": adminKey]

        for route in routes {
            let path = PathSpellings.concrete(route.path, activity: "attack", deadLetter: "0-0")
            let none = send(route.method, path, body: route.method == "POST" ? "{}" : nil)
            row("\(route.method) \(route.path) without a key", expected: "401", got: "\(none.status)", none.status == 401)
            let unknown = send(route.method, path, key: "not-a-key", body: route.method == "POST" ? "{}" : nil)
            row("\(route.method) \(route.path) with an unknown key", expected: "401", got: "\(unknown.status)", unknown.status == 401)
            for (scope, key) in keys.sorted(by: { $0.key < $1.key }) where scope != route.scope {
                let other = send(route.method, path, key: key, body: route.method == "POST" ? "{}" : nil)
                row("\(route.method) \(route.path) with a \(scope) key", expected: "403", got: "\(other.status)", other.status == 403)
            }
            let spellings = PathSpellings.of(path)
            let answers = spellings.map { send(route.method, $0, body: route.method == "POST" ? "{}" : nil).status }
            let through = zip(spellings, answers).filter { (200..<300).contains($1) || $1 == 500 || $1 == 0 }
            row("\(route.method) \(route.path): \(spellings.count) spellings without a key", expected: "no 2xx/5xx",
                got: through.isEmpty ? "none through" : through.map { "\($0.0) \($0.1)" }.joined(separator: ", "), through.isEmpty)
        }

        let rebound = send("GET", "/v1/activities", hostHeader: "rebound.example:\(port)")
        row("keyless read with Host rebound.example", expected: "401", got: "\(rebound.status)", rebound.status == 401)
        let update = #"{"content_state":{"score":"1-0"}}"#
        let untyped = send("POST", "/v1/activities/attack/update", key: ingestKey, body: update, contentType: nil)
        row("POST with a body and no Content-Type", expected: "415", got: "\(untyped.status)", untyped.status == 415)
        let form = send("POST", "/v1/activities/attack/update", key: ingestKey, body: "a=1", contentType: "application/x-www-form-urlencoded")
        row("POST as an HTML form", expected: "415", got: "\(form.status)", form.status == 415)
        let hex = String(repeating: "ef", count: 32), other = String(repeating: "12", count: 32)
        let duplicate = send("POST", "/v1/tokens", key: ingestKey, body: #"{"activity_id":"attack","token":"\#(hex)","token":"\#(other)"}"#)
        row("duplicate JSON keys", expected: "400 invalid-json", got: "\(duplicate.status) \(Self.code(duplicate))", duplicate.status == 400 && Self.code(duplicate) == "invalid-json")
        let big = send("POST", "/v1/activities/attack/update", key: ingestKey, body: #"{"content_state":{"note":"\#(String(repeating: "x", count: 5_000))"}}"#)
        row("content state over APNs' 4 KB", expected: "413 payload-too-large", got: "\(big.status) \(Self.code(big))", big.status == 413 && Self.code(big) == "payload-too-large")
        let huge = send("POST", "/v1/activities/attack/update", key: ingestKey, body: #"{"x":""# + String(repeating: "y", count: maxBodyBytes) + #""}"#)
        row("body over http.max_body_bytes", expected: "413", got: "\(huge.status)", huge.status == 413)
        let chunked = exchange("POST /v1/tokens HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer \(ingestKey)\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n")
        row("malformed chunk size", expected: "400", got: "\(chunked.status)", chunked.status == 400)
        let header = exchange("GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Big: \(String(repeating: "h", count: 40_000))\r\n\r\n")
        row("a 40 KB header", expected: "4xx or closed", got: "\(header.status)", header.status == 0 || (400..<500).contains(header.status))
        let script = send("GET", "/v1/activities/%3Cscript%3Ealert(1)%3C%2Fscript%3E", key: readKey)
        let safe = script.headers["content-type"]?.hasPrefix("application/json") == true && script.headers["x-content-type-options"] == "nosniff"
        row("an id carrying <script>", expected: "JSON, nosniff", got: "\(script.status) \(script.headers["content-type"] ?? "-") \(script.headers["x-content-type-options"] ?? "-")", safe)
        let headers = [send("GET", "/healthz"), send("GET", "/v1/activities", key: readKey), send("GET", "/nothing")]
        let marked = headers.allSatisfy { $0.headers["x-content-type-options"] == "nosniff" && $0.headers["cache-control"] == "no-store" }
        row("answers carry nosniff and no-store", expected: "all", got: marked ? "all" : "missing", marked)

        record(slowloris())
        record(idleFlood())
        record(expectWithoutKey())
        record(slowKeylessBodies())
        record(fairness())

        // The burst and what refills meanwhile, 64 requests at a time, until one is refused.
        let counts = Mutex<[Int: Int]>([:])
        for _ in 0..<max(4, 4 * rateBurst / 64) where counts.withLock({ $0[429] == nil }) {
            DispatchQueue.concurrentPerform(iterations: 64) { _ in
                // A route that reads nothing, so a 429 is the key's limit and not a busy reader.
                let answer = send("POST", "/v1/rules/explain", key: readKey, body: #"{"topic":"attack","event":{}}"#)
                let status = answer.status == 429 && Self.code(answer) != "rate-limited" ? -429 : answer.status
                counts.withLock { $0[status, default: 0] += 1 }
            }
        }
        let statuses = counts.withLock { $0 }
        let seen = statuses.sorted { $0.key < $1.key }.map { "\($0.value)×\($0.key)" }.joined(separator: " ")
        row("requests with one key past http.rate_burst \(rateBurst)", expected: "429", got: seen, statuses[429] != nil)

        let failed = rows.filter { !$0.passed }
        print("http-attack: \(rows.count) probes, \(failed.count) failed")
        if !failed.isEmpty { throw ExitCode.failure }
    }

    /// A head that never ends is closed after `http.header_timeout`.
    func slowloris() -> [Row] {
        let start = ContinuousClock.now
        guard let socket = try? RawSocket(host: host, port: port, timeout: .seconds(headerTimeout + 10)) else {
            return [Row(probe: "a head that never ends", expected: "closed", got: "no connection", passed: false)]
        }
        socket.send(Array("GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Slow: ".utf8))
        let (_, closed) = socket.receive()
        let after = (ContinuousClock.now - start) / .seconds(1)
        let got = closed ? String(format: "closed after %.1f s", after) : "still open"
        return [Row(probe: "a head that never ends", expected: String(format: "closed within %.0f s", headerTimeout + 5), got: got, passed: closed && after < headerTimeout + 5)]
    }

    /// `/healthz` timed while `idleConnections` sockets that send nothing are open.
    func idleFlood() -> [Row] {
        var idle: [RawSocket] = []
        for _ in 0..<idleConnections {
            // Begun, not awaited: past http.max_connections and the listen
            // backlog, the kernel holds the rest mid-handshake, as it would an attacker's.
            // From the attacker's address, which the main listener holds to its share.
            guard let socket = try? RawSocket(host: host, port: port, waiting: false, source: attackerAddress) else { break }
            idle.append(socket)
        }
        // The handshakes the backlog takes complete within moments.
        let settle = ContinuousClock.now + .seconds(2)
        var established = 0
        while ContinuousClock.now < settle {
            let now = RawSocket.established(idle)
            if now == established && now > 0 { break }
            established = now
            Thread.sleep(forTimeInterval: 0.2)
        }
        var rows: [Row] = []
        func timed(_ port: Int) -> (Int, Double) {
            let start = ContinuousClock.now
            let answer = (try? RawAnswer.exchange(host: host, port: port, "GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n", timeout: .seconds(30)))
            return (answer?.status ?? 0, (ContinuousClock.now - start) / .milliseconds(1))
        }
        // The probe listener first, while every idle connection is still held:
        // five probes, as a kubelet sends them one after another, judged by their median.
        if let probePort {
            let probes = (0..<5).map { _ in timed(probePort) }
            let times = probes.map(\.1).sorted()
            let median = times[times.count / 2]
            let statuses = Set(probes.map(\.0)).sorted().map(String.init).joined(separator: ",")
            rows.append(Row(
                probe: "/healthz on admin.probe_listen with \(idle.count) idle connections", expected: "200, median within 100 ms",
                got: statuses + String(format: " median %.0f ms (%.0f-%.0f)", median, times[0], times[times.count - 1]),
                passed: statuses == "200" && median <= 100))
        }
        let (main, mainMilliseconds) = timed(port)
        rows.append(Row(
            probe: "/healthz on admin.listen with \(idle.count) idle connections (\(established) established)", expected: "(measured)",
            got: String(format: "%d in %.0f ms", main, mainMilliseconds), passed: true))
        idle.removeAll()
        return rows
    }

    /// `Expect: 100-continue` without a key: 401 at once, no `100`, no body sent.
    func expectWithoutKey() -> [Row] {
        let probe = "Expect: 100-continue without a key, no body sent"
        guard let socket = try? RawSocket(host: host, port: port, timeout: .seconds(5)) else {
            return [Row(probe: probe, expected: "401 at once", got: "no connection", passed: false)]
        }
        let start = ContinuousClock.now
        socket.send(Array("POST /v1/activities/attack/update HTTP/1.1\r\nHost: attacker.example\r\nContent-Type: application/json\r\nContent-Length: 200000\r\nExpect: 100-continue\r\n\r\n".utf8))
        let (bytes, _) = socket.receive(until: RawAnswer.isComplete)
        let answer = RawAnswer(bytes)
        let milliseconds = (ContinuousClock.now - start) / .milliseconds(1)
        let status = answer?.status ?? 0
        return [Row(probe: probe, expected: "401 at once, no 100", got: String(format: "%d in %.0f ms", status, milliseconds), passed: status == 401 && milliseconds < 5_000)]
    }

    /// Keyless bodies of 255 KB sent slowly on `slowBodies` connections
    /// (spread over addresses so that no per-address cap stops them first):
    /// the worker's resident memory stays within 20 MB of where it started.
    func slowKeylessBodies() -> [Row] {
        let probe = "\(slowBodies) keyless 255 KB slow bodies"
        guard let workerPID else { return [Row(probe: probe, expected: "RSS within 20 MB", got: "skipped (no --worker-pid)", passed: true)] }
        Self.raiseDescriptorLimit()
        guard let before = Self.residentMegabytes(of: workerPID) else {
            return [Row(probe: probe, expected: "RSS within 20 MB", got: "no /proc/\(workerPID)/status", passed: false)]
        }
        let length = 255 * 1024
        var sockets: [RawSocket] = []
        for index in 0..<slowBodies {
            // 127.0.1.1 … 127.0.1.16: a few dozen connections per address.
            guard let socket = try? RawSocket(host: host, port: port, timeout: .seconds(2), source: host == "127.0.0.1" ? "127.0.1.\(index % 16 + 1)" : nil) else { continue }
            socket.send(Array("POST /v1/activities/attack-\(index)/update HTTP/1.1\r\nHost: attacker.example\r\nContent-Type: application/json\r\nContent-Length: \(length)\r\n\r\n".utf8))
            sockets.append(socket)
        }
        var peak = before
        let piece = [UInt8](repeating: UInt8(ascii: " "), count: 16 * 1024)
        var refused = 0
        for _ in 0..<(length / piece.count) {
            for socket in sockets { _ = socket.sendNow(piece) }
            peak = max(peak, Self.residentMegabytes(of: workerPID) ?? peak)
            // A slow client: the next piece a little later.
            Thread.sleep(forTimeInterval: 0.05)
        }
        for socket in sockets where socket.peerClosed { refused += 1 }
        sockets.removeAll()
        let growth = peak - before
        return [Row(
            probe: probe, expected: "RSS within 20 MB of idle",
            got: String(format: "%+.1f MB (%.0f→%.0f), %d closed", growth, before, peak, refused), passed: growth <= 20)]
    }

    /// An honest client on loopback while `attackerAddress` holds
    /// `halfOpen` sockets that send half a head (reopened as the server
    /// closes them) and `fairnessIdle` idle ones: `GET /healthz` and an
    /// authorized update on the main listener, `tries` of each, judged by
    /// their 99th percentile.
    func fairness() -> [Row] {
        Self.raiseDescriptorLimit()
        let attacker = attackerAddress
        let (host, port, halfOpen) = (host, port, halfOpen)
        let idle = (0..<fairnessIdle).compactMap { _ in try? RawSocket(host: host, port: port, waiting: false, source: attacker) }
        let churning = Churning()
        let done = DispatchSemaphore(value: 0), opened = DispatchSemaphore(value: 0)
        let churn = Thread {
            func open() -> RawSocket? {
                guard let socket = try? RawSocket(host: host, port: port, timeout: .seconds(1), source: attacker) else { return nil }
                _ = socket.sendNow(Array("GET /healthz HTTP/1.1\r\nHost: attacker.example\r\nX-Slow: ".utf8))
                return socket
            }
            var sockets: [RawSocket?] = (0..<halfOpen).map { _ in open() }
            opened.signal()
            while !churning.stop.load(ordering: .relaxed) {
                for index in sockets.indices where sockets[index]?.peerClosed ?? true {
                    sockets[index] = open()
                    churning.reopened.add(1, ordering: .relaxed)
                    if churning.stop.load(ordering: .relaxed) { break }
                }
                RawSocket.waitForAnyClosed(sockets.compactMap { $0 }, timeout: .milliseconds(100))
            }
            sockets.removeAll()
            done.signal()
        }
        churn.start()
        // Timed once every half-open socket has been opened a first time.
        _ = opened.wait(timeout: .now() + 120)
        func timed(_ request: String) -> (statuses: Set<Int>, p99: Double) {
            var statuses: Set<Int> = []
            var times: [Double] = []
            for _ in 0..<max(1, tries) {
                let start = ContinuousClock.now
                let answer = try? RawAnswer.exchange(host: host, port: port, request, timeout: .seconds(10))
                times.append((ContinuousClock.now - start) / .milliseconds(1))
                statuses.insert(answer?.status ?? 0)
            }
            times.sort()
            return (statuses, times[min(times.count - 1, Int((Double(times.count) * 0.99).rounded(.up)) - 1)])
        }
        let health = timed("GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        let body = #"{"content_state":{"score":"1-0"}}"#
        let update = timed(
            "POST /v1/activities/attack-fair/update HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nAuthorization: Bearer \(ingestKey)\r\n"
                + "Content-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)")
        churning.stop.store(true, ordering: .relaxed)
        done.wait()
        let attack = "\(halfOpen) half-open (\(churning.reopened.load(ordering: .relaxed)) reopened) + \(idle.count) idle from \(attacker)"
        func verdict(_ result: (statuses: Set<Int>, p99: Double)) -> (String, Bool) {
            let statuses = result.statuses.sorted().map(String.init).joined(separator: ",")
            return (statuses + String(format: " p99 %.0f ms", result.p99), result.statuses.allSatisfy { (200..<300).contains($0) } && result.p99 <= withinMilliseconds)
        }
        let (healthGot, healthPassed) = verdict(health), (updateGot, updatePassed) = verdict(update)
        return [
            Row(probe: "GET /healthz on admin.listen, \(attack)", expected: String(format: "200, p99 within %.0f ms", withinMilliseconds), got: healthGot, passed: healthPassed),
            Row(probe: "authorized update on admin.listen, \(attack)", expected: String(format: "2xx, p99 within %.0f ms", withinMilliseconds), got: updateGot, passed: updatePassed),
        ]
    }

    /// What the fairness probe's attacking thread shares with it.
    final class Churning: Sendable {
        let stop = Atomic<Bool>(false)
        let reopened = Atomic<Int>(0)
    }

    /// Raises this process's open-file limit to its hard limit, for thousands of sockets.
    static func raiseDescriptorLimit() {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur < limit.rlim_max else { return }
        limit.rlim_cur = limit.rlim_max
        _ = setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
    }

    /// A process's resident memory in MB (`VmRSS` of `/proc/<pid>/status`).
    static func residentMegabytes(of pid: Int32) -> Double? {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
            let kilobytes = line.split(separator: " ").dropFirst().first.flatMap({ Double($0) })
        else { return nil }
        return kilobytes / 1024
    }

    // MARK: Requests

    func send(
        _ method: String, _ path: String, key: String? = nil, body: String? = nil, contentType: String? = "application/json",
        hostHeader: String? = nil
    ) -> RawAnswer {
        // Without a key, the Host is not loopback: a server bound to loopback
        // answers keyless reads to its own machine only, and this is not it.
        let host = hostHeader ?? (key == nil ? "attacker.example" : "localhost")
        var request = "\(method) \(path) HTTP/1.1\r\nHost: \(host)\r\nConnection: close\r\n"
        if let key { request += "Authorization: Bearer \(key)\r\n" }
        if let body {
            if let contentType { request += "Content-Type: \(contentType)\r\n" }
            request += "Content-Length: \(body.utf8.count)\r\n\r\n\(body)"
        } else {
            request += "\r\n"
        }
        return exchange(request)
    }

    func exchange(_ request: String) -> RawAnswer {
        (try? RawAnswer.exchange(host: host, port: port, request)) ?? RawAnswer(status: 0, headers: [:], body: "")
    }

    static func code(_ answer: RawAnswer) -> String {
        (try? JSONValue.parse(answer.body))?["error"]?.stringValue ?? "-"
    }

    static func format(_ row: Row) -> String {
        func pad(_ text: String, _ width: Int) -> String { text.count >= width ? text : text + String(repeating: " ", count: width - text.count) }
        return pad(row.probe, 66) + " " + pad(row.expected, 22) + " " + pad(row.got, 28) + " " + (row.passed ? "ok" : "FAILED")
    }

    // MARK: Routes

    struct Route {
        var method: String
        var path: String
        var scope: String
    }

    /// Every operation of the document with the scope it declares.
    static func routes(_ document: JSONValue) -> [Route] {
        var routes: [Route] = []
        for (path, item) in document["paths"]?.objectValue ?? [:] {
            for (method, operation) in item.objectValue ?? [:] {
                let scope = operation["security"]?.arrayValue?.first?["bearer"]?.arrayValue?.first?.stringValue ?? "?"
                routes.append(Route(method: method.uppercased(), path: path, scope: scope))
            }
        }
        return routes.sorted { ($0.path, $0.method) < ($1.path, $1.method) }
    }
}
