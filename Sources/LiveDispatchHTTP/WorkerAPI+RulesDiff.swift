import Foundation
import LiveDispatchCore
import LiveDispatchRules
import LiveDispatchWorker
import Synchronization

extension WorkerAPI {
    /// `POST /v1/rules/diff`: `rules diff --json` for the rules this worker
    /// runs against its rules directory with the request's files replaced
    /// or added, on the domain records of the last minutes.
    func diffRules(_ input: Operations.DiffRules.Input) async throws -> Operations.DiffRules.Output {
        let request = switch input.body { case .json(let body): body }
        guard let source = rulesDiff else {
            return .serviceUnavailable(.init(headers: .init(retryAfter: 60), body: .json(.init(error: "unavailable", message: "this server has no rules directory to diff against"))))
        }
        let minutes = request.minutes ?? 10
        let limit = request.limit ?? 20
        let limitEvents = request.limitEvents ?? 200_000
        var problems: [Components.Schemas.Problem] = []
        if !(1...1440).contains(minutes) { problems.append(.init(pointer: "/minutes", message: "expected 1 to 1440")) }
        if !(1...100).contains(limit) { problems.append(.init(pointer: "/limit", message: "expected 1 to 100")) }
        if !(1...1_000_000).contains(limitEvents) { problems.append(.init(pointer: "/limit_events", message: "expected 1 to 1000000")) }
        let given = request.files.additionalProperties
        if given.isEmpty || given.count > 20 { problems.append(.init(pointer: "/files", message: "expected 1 to 20 rule files")) }
        for name in given.keys.sorted() where !Self.isRuleFileName(name) {
            problems.append(.init(pointer: "/files/\(name)", message: "expected a file name of letters, digits, '.', '_' and '-' ending in .yaml or .yml"))
        }
        guard problems.isEmpty else { return .badRequest(.init(body: .json(APIError.invalid("the request is not valid", problems: problems).body))) }

        let newRules: RuleSet
        do {
            newRules = try RuleSet.compile(files: Self.files(replacing: given, in: source.rulesDirectory))
        } catch {
            let diagnostics = error.diagnostics.prefix(20).map { diagnostic in
                // The rules directory itself is named as such, never by its path on the server.
                var diagnostic = diagnostic
                let isDirectory = diagnostic.location.file == source.rulesDirectory
                if isDirectory { diagnostic.location.file = "the rules directory" }
                let pointer = isDirectory ? "/files" : "/files/\((diagnostic.location.file as NSString).lastPathComponent)"
                return Components.Schemas.Problem(pointer: pointer, message: diagnostic.description)
            }
            return .badRequest(.init(body: .json(APIError.invalid("the new rules have problems", problems: Array(diagnostics)).body)))
        }

        // The caller's budget, and one diff at a time per key.
        let caller = RequestCaller.current ?? RequestCaller(name: AccessGate.keylessReads, scopes: [.read])
        let budget = caller.scopes.contains(.admin) ? source.adminBudget : source.readBudget
        guard source.running.enter(caller.name) else {
            return .tooManyRequests(.init(
                headers: .init(retryAfter: 1),
                body: .json(.init(error: "busy", message: "a rules diff of this key is running; each key runs one at a time, retry after it answers"))))
        }
        defer { source.running.leave(caller.name) }
        let events = min(limitEvents, max(1, budget.events))
        let seconds = budget.seconds.isFinite ? min(max(budget.seconds, 0), 86_400) : 10
        let deadline = source.clock() + .milliseconds(Int64(seconds * 1000))

        let wallClock = Date().timeIntervalSince1970
        var run = RuleDiffRun(
            base: rules(), new: newRules, maxEventBytes: source.maxEventBytes, limitEvents: events, now: UnixTime(seconds: wallClock))
        let since = Int64(exactly: ((wallClock - Double(minutes * 60)) * 1000).rounded(.down)) ?? 0
        var cut: RulesDiffCut?
        let failure = await Self.reading {
            do {
                try await source.read(run.topics, since, events) { records in
                    for record in records {
                        if source.clock() >= deadline { throw RulesDiffCut.seconds }
                        if Task.isCancelled { throw CancellationError() }
                        run.take(record)
                    }
                }
            } catch let spent as RulesDiffCut {
                cut = spent
            }
        }
        switch failure {
        case .busy(let answer)?: return .tooManyRequests(answer)
        case .unavailable(let answer)?: return .serviceUnavailable(answer)
        case nil: break
        }
        if cut == nil, events < limitEvents, run.isFull { cut = .events }
        var report = run.diff.report(limit: limit).json(render: { LockScreen.render($0) })
        if case .object(var fields) = report {
            if let cut { fields["cut"] = .string(cut.rawValue) }
            fields["budget"] = ["events": .integer(Int64(events)), "seconds": .double(seconds)]
            report = .object(fields)
        }
        guard let body = Self.container(report) else {
            return .serviceUnavailable(.init(headers: .init(retryAfter: 1), body: .json(.init(error: "unavailable", message: "the diff could not be written as JSON"))))
        }
        return .ok(.init(body: .json(body)))
    }

    /// A rule file's name as a request may give it: no path, a YAML suffix.
    static func isRuleFileName(_ name: String) -> Bool {
        guard (1...100).contains(name.utf8.count), name.hasSuffix(".yaml") || name.hasSuffix(".yml"), !name.hasPrefix(".") else { return false }
        return name.unicodeScalars.allSatisfy { $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || "._-".unicodeScalars.contains($0)) }
    }

    /// The rules directory's files with those `given` (by name) replacing
    /// the files of the same name or added beside them, each named by its
    /// path inside the directory: what the answer says of a file never
    /// shows where the server keeps its rules.
    static func files(replacing given: [String: String], in directory: String) throws(RuleSetError) -> [(name: String, text: String)] {
        let base = directory.hasSuffix("/") ? directory : directory + "/"
        var files = try RuleSet.readFiles(directory: directory)
            .map { file in (name: file.name.hasPrefix(base) ? String(file.name.dropFirst(base.count)) : (file.name as NSString).lastPathComponent, text: file.text) }
            .filter { given[$0.name] == nil }
        for (name, text) in given.sorted(by: { $0.key < $1.key }) { files.append((name, text)) }
        return files
    }
}

/// Why a rules diff stopped before reading all it was asked to: its
/// caller's budget of seconds, or of events, was spent.
enum RulesDiffCut: String, Error {
    case seconds
    case events
}

/// The callers (by key name) whose rules diff is running.
final class RulesDiffRuns: Sendable {
    private let running = Mutex<Set<String>>([])

    /// False when the caller's diff is already running.
    func enter(_ caller: String) -> Bool { running.withLock { $0.insert(caller).inserted } }

    func leave(_ caller: String) { _ = running.withLock { $0.remove(caller) } }
}
