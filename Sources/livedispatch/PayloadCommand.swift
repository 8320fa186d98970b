import ArgumentParser
import Foundation
import LiveDispatchCore

/// `livedispatch payload`: shows the HTTP/2 request a command would send.
struct PayloadCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "payload",
        abstract: "Print the APNs request (headers and body) a command would send, applied to a state.",
        discussion: """
            The state file is either an activity state snapshot as kept on the `state` topic \
            (an object with `activity_id` and `content_state`) or a bare content-state object. \
            The command file is an ActivityCommand as written to the `commands` topic. \
            The command is merged into the state exactly as the worker does and flushed at once. \
            The `authorization` header is not shown: each connection adds its own JWT.
            """
    )

    @Option(help: "JSON file with the activity's current state (omit for a new activity).")
    var state: String?

    @Option(help: "JSON file with the ActivityCommand to apply.")
    var command: String

    @Option(help: "Hex device token for the :path (default: a placeholder name).")
    var token: String?

    @Option(help: "The app's bundle id; the topic is <bundle>.push-type.liveactivity.")
    var bundleID = "com.example.app"

    @Option(help: "production or sandbox: which APNs host would receive it.")
    var environment = "production"

    @Option(help: "apns-id to show (default: a new random UUID).")
    var apnsID: String?

    @Option(help: "Current time as Unix seconds (default: now); the event time when the command has none.")
    var now: Double?

    func run() throws {
        do {
            print(try render(), terminator: "")
        } catch {
            FileHandle.standardError.write(Data("error: \(error.message)\n".utf8))
            throw ExitCode.failure
        }
    }

    func render() throws(PayloadCommandError) -> String {
        guard let environment = APNsEnvironment(rawValue: environment) else {
            throw PayloadCommandError("--environment \(self.environment.debugDescription) is not production or sandbox")
        }
        let destination: APNsRequest.Destination?
        if let token {
            do {
                destination = .device(try DeviceToken(hex: token))
            } catch {
                throw PayloadCommandError("--token: \(error.message)")
            }
        } else {
            destination = nil
        }
        let commandValue = try Self.readJSON(command)
        let parsed: ActivityCommand
        do {
            parsed = try ActivityCommand(json: commandValue)
        } catch {
            throw PayloadCommandError("\(command): \(error)")
        }
        let currentTime = UnixTime(seconds: now ?? Date().timeIntervalSince1970)
        var coalescer = Coalescer()
        var offset: Int64 = 0
        if let state {
            let snapshot = try Self.readState(state, activityID: parsed.activityID, now: currentTime)
            coalescer.restore(snapshot)
            offset = (snapshot.lastOffset ?? -1) + 1
        }
        let flush: Coalescer.Flush
        switch coalescer.receive(parsed, offset: offset, recordTime: currentTime, now: currentTime) {
        case .flush(let flushed):
            flush = flushed
        case .scheduleFlush:
            guard let flushed = coalescer.flushAll(now: currentTime).first else {
                throw PayloadCommandError("\(command): the command produced no push")
            }
            flush = flushed
        case .reject(let reason, let message, _):
            throw PayloadCommandError("\(command): \(reason): \(message)")
        case .alreadyApplied:
            throw PayloadCommandError("\(command): already applied to the state (offset at or below its last_offset)")
        case .duplicate(let commandID):
            throw PayloadCommandError("\(command): command id \(commandID.debugDescription) was already applied to the state; it would be acknowledged and not applied")
        }
        let payload: [UInt8]
        do {
            payload = try APNsPayload.encode(flush.push)
        } catch {
            throw PayloadCommandError("\(command): \(error)")
        }
        // Without --token the headers are built for a one-byte token and the :path line is shown generically.
        let shownDestination: APNsRequest.Destination
        do {
            shownDestination = try destination ?? .device(DeviceToken(bytes: [0]))
        } catch {
            throw PayloadCommandError("internal: \(error)")
        }
        let request = APNsRequest(
            push: flush.push, payload: payload, to: shownDestination, bundleID: bundleID,
            apnsID: apnsID ?? UUID().uuidString.lowercased(), now: currentTime)
        var lines: [String] = []
        for header in request.headers {
            if header.name == ":path", destination == nil {
                lines.append(":path: /3/device/{device token}")
            } else {
                lines.append("\(header.name): \(header.value)")
            }
            if header.name == ":path" { lines.append(":authority: \(environment.host)") }
        }
        lines.append("")
        lines.append(String(decoding: payload, as: UTF8.self))
        return lines.joined(separator: "\n") + "\n"
    }

    static func readJSON(_ path: String) throws(PayloadCommandError) -> JSONValue {
        let bytes: [UInt8]
        do {
            bytes = Array(try Data(contentsOf: URL(fileURLWithPath: path)))
        } catch {
            throw PayloadCommandError("\(path): cannot be read (\(error.localizedDescription))")
        }
        do {
            return try JSONValue.parse(bytes)
        } catch {
            throw PayloadCommandError("\(path):\(error.line):\(error.column): \(error.message)")
        }
    }

    static func readState(_ path: String, activityID: ActivityID, now: UnixTime) throws(PayloadCommandError) -> ActivityState {
        let value = try Self.readJSON(path)
        guard case .object(let fields) = value else {
            throw PayloadCommandError("\(path): expected a JSON object (a state snapshot or a content-state), got \(value.typeName)")
        }
        if fields["activity_id"] != nil, fields["content_state"] != nil {
            var object = fields
            if object["version"] == nil { object["version"] = 0 }
            if object["created_at"] == nil { object["created_at"] = .double(now.seconds) }
            do {
                let snapshot = try ActivityState(json: .object(object))
                guard snapshot.activityID == activityID else {
                    throw PayloadCommandError(
                        "\(path): the state is for activity \(snapshot.activityID) but the command is for \(activityID)")
                }
                return snapshot
            } catch let error as FieldError {
                throw PayloadCommandError("\(path): \(error)")
            } catch let error as PayloadCommandError {
                throw error
            } catch {
                throw PayloadCommandError("\(path): \(error)")
            }
        }
        return ActivityState(activityID: activityID, contentState: value, createdAt: now)
    }
}

/// A problem with the `payload` command's input, reported on standard error.
struct PayloadCommandError: Error {
    var message: String
    init(_ message: String) { self.message = message }
}
