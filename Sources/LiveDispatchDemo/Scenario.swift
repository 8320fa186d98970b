import Foundation
import LiveDispatchCore
import LiveDispatchWorker

/// A recorded sequence of records to publish (`Config/examples/*.jsonl`):
/// the demo's input and a way to reproduce a situation by hand.
public struct Scenario: Sendable {
    /// One record to publish.
    public struct Step: Sendable, Hashable {
        public enum Destination: Sendable, Hashable {
            /// A domain topic read by the rules.
            case domain(String)
            /// An internal topic, named without its prefix.
            case internalTopic(InternalTopic)
        }

        /// Seconds after the start of the replay.
        public var after: Double
        public var destination: Destination
        public var key: String?
        public var value: JSONValue
        /// `file:line` it was read from.
        public var source: String

        /// The value's bytes with every `${now…}` placeholder resolved against `now`.
        public func renderedValue(now: UnixTime) -> [UInt8] {
            Scenario.resolve(value, now: now).serialized()
        }
    }

    public var steps: [Step]

    /// Reads every `*.jsonl` file of a directory (or one file); steps of all
    /// files are merged by time, file order breaking ties.
    public static func load(path: String) throws(ScenarioError) -> Scenario {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
            throw ScenarioError("\(path): no such file or directory")
        }
        var files: [String] = [path]
        if isDirectory.boolValue {
            let names = (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []
            files = names.filter { $0.hasSuffix(".jsonl") }.sorted().map { (path as NSString).appendingPathComponent($0) }
            if files.isEmpty { throw ScenarioError("\(path): no .jsonl scenario files") }
        }
        var steps: [Step] = []
        for file in files {
            guard let text = try? String(contentsOfFile: file, encoding: .utf8) else {
                throw ScenarioError("\(file): cannot be read")
            }
            for (index, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
                let trimmed = line.trimmingCharacters(in: .whitespaces)
                if trimmed.isEmpty || trimmed.hasPrefix("#") { continue }
                steps.append(try parseStep(trimmed, source: "\(file):\(index + 1)"))
            }
        }
        return Scenario(steps: steps.enumerated().sorted { ($0.element.after, $0.offset) < ($1.element.after, $1.offset) }.map(\.element))
    }

    static func parseStep(_ line: String, source: String) throws(ScenarioError) -> Step {
        let object: JSONValue
        do {
            object = try JSONValue.parse(line)
        } catch {
            throw ScenarioError("\(source):\(error.column): \(error.message)")
        }
        guard case .object(let fields) = object else { throw ScenarioError("\(source): expected a JSON object per line") }
        let unknown = Set(fields.keys).subtracting(["after", "topic", "stream", "key", "value"])
        if let first = unknown.sorted().first { throw ScenarioError("\(source): unknown field '\(first)' (known: after, key, stream, topic, value)") }
        guard let afterText = fields["after"]?.stringValue ?? fields["after"]?.numberValue.map({ "\($0)" }),
              let after = WorkerConfiguration.duration(afterText)
        else { throw ScenarioError("\(source): 'after' must be a duration such as 0.5s or 250ms") }
        let destination: Step.Destination
        switch (fields["topic"]?.stringValue, fields["stream"]?.stringValue) {
        case (let topic?, nil):
            destination = .domain(topic)
        case (nil, let stream?):
            guard let topic = InternalTopic(rawValue: stream) else {
                throw ScenarioError("\(source): 'stream' must be one of \(InternalTopic.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            destination = .internalTopic(topic)
        default:
            throw ScenarioError("\(source): give exactly one of 'topic' (a domain topic) or 'stream' (an internal topic)")
        }
        guard let value = fields["value"] else { throw ScenarioError("\(source): 'value' is required") }
        return Step(after: after, destination: destination, key: fields["key"]?.stringValue, value: value, source: source)
    }

    /// Replaces strings `${now}`, `${now+12m}`, `${now-1h}` with ISO-8601 times.
    static func resolve(_ value: JSONValue, now: UnixTime) -> JSONValue {
        switch value {
        case .string(let text):
            guard text.hasPrefix("${now"), text.hasSuffix("}") else { return value }
            let offsetText = text.dropFirst(5).dropLast()
            if offsetText.isEmpty { return .string(now.iso8601) }
            guard let sign = offsetText.first, sign == "+" || sign == "-", let seconds = WorkerConfiguration.duration(String(offsetText.dropFirst())) else {
                return value
            }
            return .string((now + (sign == "+" ? seconds : -seconds)).iso8601)
        case .array(let elements):
            return .array(elements.map { resolve($0, now: now) })
        case .object(let fields):
            return .object(fields.mapValues { resolve($0, now: now) })
        case .null, .bool, .integer, .double:
            return value
        }
    }
}

/// A scenario file that could not be read, with `file:line`.
public struct ScenarioError: Error, Sendable, Hashable, CustomStringConvertible {
    public var description: String
    init(_ description: String) { self.description = description }
}
