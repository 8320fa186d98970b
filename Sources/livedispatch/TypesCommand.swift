import ArgumentParser
import Foundation
import LiveDispatchCore
import LiveDispatchRules

/// `livedispatch types ...`: the activity types the rule files declare,
/// and the offline check of commands and states against them.
struct TypesCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "types",
        abstract: "List the declared activity types, or check commands and states against them offline.",
        subcommands: [List.self, Check.self])

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Print each activity type of the rules directory with its fields.")

        @Option(help: "The rules directory (its activity_types).") var rules: String = RulesCommand.defaultDirectory

        func run() throws {
            let types = try RulesCommand.loadOrExit(rules).types
            if types.isEmpty { print("no activity types are declared in \(rules)") }
            for name in types.names {
                guard let type = types[name] else { continue }
                print(name)
                print("  content_state: " + Self.describe(type.contentState))
                print("  attributes: " + (type.attributes.map(Self.describe) ?? "not declared (not checked)"))
            }
        }

        static func describe(_ fields: [SchemaField]) -> String {
            "{" + fields.map { field in
                let type = if case .object(let nested) = field.type { describe(nested) } else { field.type.name }
                return "\(field.name)\(field.optional ? "?" : ""): \(type)"
            }.joined(separator: ", ") + "}"
        }
    }

    struct Check: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Check command or state files against their activity type, as the worker does before sending.",
            discussion: """
                Each FILE is a command as written to the `commands` topic (an object with \
                `activity_id`), a state snapshot as kept on the `state` topic (with `activity_id`, `version` \
                and `content_state`), or a bare content-state object. A command is merged into \
                --state when given, exactly as the worker merges it, and the merged state is \
                checked; without --state a start (or a command with replace_state) is checked \
                whole and a merge patch in the fields it names. The type is the one the file \
                names (attributes_type), else the --state's, else --type. Exit status 1 when \
                a file does not fit or cannot be read.
                """)

        @Option(help: "The rules directory (its activity_types).") var rules: String = RulesCommand.defaultDirectory
        @Option(help: "The activity type, for files that name none.") var type: String?
        @Option(help: "JSON file with the activity's current state, to check commands merged into it.") var state: String?
        @Argument(help: "Command or state files.") var files: [String]

        func run() throws {
            let types = try RulesCommand.loadOrExit(rules).types
            if let type, types[type] == nil {
                RulesCommand.printError("--type \(type.debugDescription) is not declared in \(rules) (declared: \(types.names.joined(separator: ", ")))")
                throw ExitCode(1)
            }
            var failed = false
            for file in files {
                do {
                    print("\(file): fits \(try check(file, types: types))")
                } catch {
                    print("\(file): \(error.message)")
                    failed = true
                }
            }
            if failed { throw ExitCode(1) }
        }

        /// The type `file` fits, or why it does not.
        func check(_ file: String, types: ActivityTypes) throws(PayloadCommandError) -> String {
            let value = try PayloadCommand.readJSON(file)
            let now = UnixTime(seconds: Date().timeIntervalSince1970)
            guard value["activity_id"] != nil, value["content_state"] == nil || value["version"] == nil else {
                // A state snapshot, or a bare content-state.
                let snapshot = value["activity_id"] == nil ? nil : try PayloadCommand.readState(file, activityID: try activityID(value, file), now: now)
                let name = try typeName(snapshot?.attributesType)
                guard let declared = types[name] else { throw undeclared(name, types) }
                if let problem = declared.contentStateMismatch(snapshot?.contentState ?? value) { throw mismatch(problem, name) }
                if let attributes = snapshot?.attributes, let problem = declared.attributesMismatch(attributes) { throw mismatch(problem, name) }
                return name
            }
            var command: ActivityCommand
            do {
                command = try ActivityCommand(json: value)
            } catch {
                throw PayloadCommandError("not a valid command: \(error)")
            }
            let current = try state.map { path throws(PayloadCommandError) in try PayloadCommand.readState(path, activityID: command.activityID, now: now) }
            let name = try typeName(command.attributesType ?? current?.attributesType)
            guard types[name] != nil else { throw undeclared(name, types) }
            // The type found (the command's, the state's or --type) is the one checked.
            if command.attributesType == nil { command.attributesType = name }
            if let refusal = types.refusal(of: command, current: current, now: now) { throw mismatch(refusal.problem, "\(refusal.type) (\(refusal.reason))") }
            return name
        }

        private func typeName(_ named: String?) throws(PayloadCommandError) -> String {
            guard let name = named ?? type else { throw PayloadCommandError("names no activity type; give --type") }
            return name
        }

        private func activityID(_ value: JSONValue, _ file: String) throws(PayloadCommandError) -> ActivityID {
            do {
                return try ActivityID(value["activity_id"]?.stringValue ?? "")
            } catch {
                throw PayloadCommandError("activity_id: \(error.message)")
            }
        }

        private func undeclared(_ name: String, _ types: ActivityTypes) -> PayloadCommandError {
            PayloadCommandError("activity type \(name.debugDescription) is not declared in \(rules) (declared: \(types.names.joined(separator: ", "))); the worker would send it unchecked")
        }

        private func mismatch(_ problem: FieldError, _ type: String) -> PayloadCommandError {
            PayloadCommandError("does not fit \(type): \(problem.field): \(problem.message)")
        }
    }
}
