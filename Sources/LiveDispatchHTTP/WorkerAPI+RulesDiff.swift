import Foundation
import LiveDispatchCore
import LiveDispatchRules
import LiveDispatchWorker

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
                Components.Schemas.Problem(pointer: "/files/\((diagnostic.location.file as NSString).lastPathComponent)", message: diagnostic.description)
            }
            return .badRequest(.init(body: .json(APIError.invalid("the new rules have problems", problems: Array(diagnostics)).body)))
        }

        let wallClock = Date().timeIntervalSince1970
        var run = RuleDiffRun(
            base: rules(), new: newRules, maxEventBytes: source.maxEventBytes, limitEvents: limitEvents, now: UnixTime(seconds: wallClock))
        let since = Int64(exactly: ((wallClock - Double(minutes * 60)) * 1000).rounded(.down)) ?? 0
        let failure = await Self.reading {
            try await source.read(run.topics, since, limitEvents) { records in
                for record in records { run.take(record) }
            }
        }
        switch failure {
        case .busy(let answer)?: return .tooManyRequests(answer)
        case .unavailable(let answer)?: return .serviceUnavailable(answer)
        case nil: break
        }
        let report = run.diff.report(limit: limit).json(render: { LockScreen.render($0) })
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
    /// the files of the same name or added beside them.
    static func files(replacing given: [String: String], in directory: String) throws(RuleSetError) -> [(name: String, text: String)] {
        let base = directory.hasSuffix("/") ? directory : directory + "/"
        var files = try RuleSet.readFiles(directory: directory).filter { given[($0.name as NSString).lastPathComponent] == nil }
        for (name, text) in given.sorted(by: { $0.key < $1.key }) { files.append((base + name, text)) }
        return files
    }
}
