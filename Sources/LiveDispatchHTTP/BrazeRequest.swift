import LiveDispatchCore

/// A body of Braze's `POST /messages/live_activity/update` or `/start`, read
/// as Braze documents it and turned into the ``ActivityCommand`` it stands
/// for, or into the list of its problems, each naming its field (a JSON
/// pointer into the body) and why. A field LiveDispatch cannot honour is
/// refused, never ignored.
///
/// - update: `activity_id`, `content_state`, `dismissal_date`, `stale_date`,
///   `notification` → an `update` command, an `end` when `end_activity` is true.
/// - start: besides, `activity_attributes_type` → `attributes_type`,
///   `activity_attributes` → `attributes`, and each `external_user_ids`
///   entry (the id itself) and `user_aliases` entry
///   (`alias:<alias_label>:<alias_name>`) → an audience key.
/// - `app_id` → the configured app (``BrazeApps``).
/// - `notification` (Braze's `apple_push` object) → `alert`
///   (`alert.title`/`alert.body`, or their `title_loc_key`/`title_loc_args`
///   and `loc_key`/`loc_args`), `sound`, and `content-available: true` →
///   priority 5; `priority` (10 or 5) as well.
struct BrazeRequest: Sendable {
    enum Kind: String, Sendable {
        case update
        case start

        var route: String { "/messages/live_activity/\(rawValue)" }
    }

    /// One refused field: a JSON pointer into the body and why.
    struct Problem: Sendable, Hashable {
        var pointer: String
        var message: String
    }

    /// Why a body was refused: each problem found.
    struct Refusal: Error, Sendable, Hashable {
        var problems: [Problem]
    }

    /// Most recipients (`external_user_ids` and `user_aliases` together) of one start, as Braze allows.
    static let maxRecipients = 50
    /// The audience key prefix of a Braze user alias.
    static let aliasPrefix = "alias:"

    /// Fields of both bodies that become part of the command.
    static let commonFields: Set<String> = ["app_id", "activity_id", "content_state", "dismissal_date", "stale_date", "notification", "priority"]
    static let updateFields = commonFields.union(["end_activity"])
    static let startFields = commonFields.union(["activity_attributes_type", "activity_attributes", "external_user_ids", "user_aliases"])

    /// Braze fields LiveDispatch cannot honour, with the reason each is refused.
    static let refusedStartFields: [String: String] = [
        "segment_id": "LiveDispatch has no Braze segments; address users with external_user_ids or user_aliases, whose push-to-start tokens are registered under those audience keys",
        "custom_audience": "LiveDispatch holds no user profiles to filter a connected audience on; address users with external_user_ids or user_aliases",
        "audience": "LiveDispatch holds no user profiles to filter an audience on; address users with external_user_ids or user_aliases",
        "recipients": "give the users in external_user_ids or user_aliases, as Braze's live_activity/start documents them",
        "broadcast": "LiveDispatch does not send to every user of an app; address users with external_user_ids or user_aliases",
    ]
    static let refusedUpdateFields: [String: String] = [
        "segment_id": "an update goes to the devices that registered an update token for activity_id; it addresses no users",
        "custom_audience": "an update goes to the devices that registered an update token for activity_id; it addresses no users",
        "external_user_ids": "an update goes to the devices that registered an update token for activity_id; it addresses no users",
        "user_aliases": "an update goes to the devices that registered an update token for activity_id; it addresses no users",
        "activity_attributes_type": "only a start sets an activity's attributes type",
        "activity_attributes": "only a start sets an activity's attributes",
    ]
    /// `apple_push` fields a Live Activity push carries.
    static let notificationFields: Set<String> = ["alert", "sound", "content-available"]
    static let alertFields: Set<String> = ["title", "body", "title_loc_key", "title_loc_args", "loc_key", "loc_args"]

    let kind: Kind
    let body: JSONValue

    /// The command the body stands for. `idempotencyKey` (already checked)
    /// or `makeID` gives its id; `apps` resolves `app_id`, `directory` says
    /// whether a start names its app (several apps) or not (one).
    func command(
        idempotencyKey: String?, makeID: () -> String, apps: BrazeApps, directory: AppDirectory
    ) -> Result<ActivityCommand, Refusal> {
        guard case .object(let fields) = body else {
            return .failure(Refusal(problems: [Problem(pointer: "", message: "expected a JSON object, Braze's \(kind.route) body")]))
        }
        var problems: [Problem] = []
        var command: [String: JSONValue] = ["event": .string(kind == .start ? "start" : "update")]
        let known = kind == .start ? Self.startFields : Self.updateFields
        let refused = kind == .start ? Self.refusedStartFields : Self.refusedUpdateFields
        for name in fields.keys.sorted() where !known.contains(name) {
            let reason = refused[name] ?? "is not a field of Braze's \(kind.route) body (its fields: \(known.sorted().joined(separator: ", ")))"
            problems.append(Problem(pointer: JSONPointer.make([name]), message: reason))
        }

        // app_id: a configured app.
        switch fields["app_id"] {
        case .string(let appID)?:
            if let app = apps.app(for: appID) {
                // With several apps every command names its app: the
                // dispatcher refuses one whose activity belongs to another.
                if directory.apps.count > 1 { command["app"] = .string(app) }
            } else {
                problems.append(Problem(pointer: "/app_id", message: apps.unknown(appID)))
            }
        case nil, .null?: problems.append(Problem(pointer: "/app_id", message: "is required: the Braze app id, name or bundle id of a configured app"))
        case let other?: problems.append(Problem(pointer: "/app_id", message: "expected a string, got \(other.typeName)"))
        }

        for name in ["activity_id", "dismissal_date", "stale_date", "priority"] { command[name] = fields[name] }
        switch fields["content_state"] {
        case nil, .null?: problems.append(Problem(pointer: "/content_state", message: "is required: the activity's ContentState values"))
        case let value?: command["content_state"] = value
        }
        if kind == .update {
            switch fields["end_activity"] {
            case .bool(true)?: command["event"] = .string("end")
            case nil, .null?, .bool(false)?: break
            case let other?: problems.append(Problem(pointer: "/end_activity", message: "expected true or false, got \(other.typeName)"))
            }
        } else {
            command["attributes_type"] = fields["activity_attributes_type"]
            command["attributes"] = fields["activity_attributes"]
            if fields["activity_attributes_type"] == nil {
                problems.append(Problem(pointer: "/activity_attributes_type", message: "is required: the ActivityAttributes type the push-to-start tokens were registered for"))
            }
            if fields["activity_attributes"] == nil {
                problems.append(Problem(pointer: "/activity_attributes", message: "is required: the activity's static attributes"))
            }
            if fields["notification"] == nil {
                problems.append(Problem(pointer: "/notification", message: "is required for a start: an alert with title and body"))
            }
            switch Self.audiences(fields) {
            case .success(let audiences): command["audiences"] = .array(audiences.map { .string($0) })
            case .failure(let found): problems += found.problems
            }
        }
        if let notification = fields["notification"] {
            switch Self.notification(notification, priority: fields["priority"]) {
            case .success(let (alert, priority)):
                command["alert"] = alert
                if let priority { command["priority"] = priority }
            case .failure(let found): problems += found.problems
            }
        }
        guard problems.isEmpty else { return .failure(Refusal(problems: problems)) }

        command["id"] = .string(idempotencyKey ?? makeID())
        do {
            return .success(try ActivityCommand(json: .object(command), apps: directory))
        } catch {
            return .failure(Refusal(problems: [Problem(pointer: Self.pointer(ofCommandField: error.field), message: error.message)]))
        }
    }

    /// The audience keys of a start's recipients, in the order given, each once.
    static func audiences(_ fields: [String: JSONValue]) -> Result<[String], Refusal> {
        var problems: [Problem] = [], keys: [String] = []
        func add(_ key: String) { if !keys.contains(key) { keys.append(key) } }
        var count = 0
        switch fields["external_user_ids"] {
        case nil, .null?: break
        case .array(let ids)?:
            count += ids.count
            for (index, id) in ids.enumerated() {
                let pointer = "/external_user_ids/\(index)"
                guard case .string(let text) = id else { problems.append(Problem(pointer: pointer, message: "expected an external user id (a string), got \(id.typeName)")); continue }
                if text.hasPrefix(aliasPrefix) {
                    problems.append(Problem(pointer: pointer, message: "an external user id may not begin with \(aliasPrefix.debugDescription), the audience keys of user aliases"))
                } else if let problem = audienceProblem(text) {
                    problems.append(Problem(pointer: pointer, message: problem))
                } else {
                    add(text)
                }
            }
        case let other?: problems.append(Problem(pointer: "/external_user_ids", message: "expected an array of external user ids, got \(other.typeName)"))
        }
        switch fields["user_aliases"] {
        case nil, .null?: break
        case .array(let aliases)?:
            count += aliases.count
            for (index, alias) in aliases.enumerated() {
                let pointer = "/user_aliases/\(index)"
                guard case .object(let members) = alias, case .string(let name)? = members["alias_name"], case .string(let label)? = members["alias_label"],
                      members.count == 2, !name.isEmpty, !label.isEmpty
                else {
                    problems.append(Problem(pointer: pointer, message: "expected a user alias: {\"alias_name\": …, \"alias_label\": …}, both non-empty strings"))
                    continue
                }
                let key = aliasKey(label: label, name: name)
                if let problem = audienceProblem(key) { problems.append(Problem(pointer: pointer, message: problem)) } else { add(key) }
            }
        case let other?: problems.append(Problem(pointer: "/user_aliases", message: "expected an array of user aliases, got \(other.typeName)"))
        }
        if count == 0 && problems.isEmpty {
            problems.append(Problem(pointer: "/external_user_ids", message: "a start needs recipients: give external_user_ids, user_aliases or both (segment_id and custom_audience are not supported)"))
        } else if count > maxRecipients {
            problems.append(Problem(pointer: "/external_user_ids", message: "external_user_ids and user_aliases name \(count) users together, more than Braze's \(maxRecipients)"))
        }
        return problems.isEmpty ? .success(keys) : .failure(Refusal(problems: problems))
    }

    /// The audience key of a user alias: `alias:<label>:<name>`, with `%`
    /// and `:` in the label written `%25` and `%3A`, so the first `:` after
    /// the prefix ends the label and no two aliases share a key (label
    /// `a:b` with name `c` is `alias:a%3Ab:c`; label `a` with name `b:c` is
    /// `alias:a:b:c`).
    static func aliasKey(label: String, name: String) -> String {
        var escaped = ""
        for character in label {
            switch character {
            case "%": escaped += "%25"
            case ":": escaped += "%3A"
            default: escaped.append(character)
            }
        }
        return aliasPrefix + escaped + ":" + name
    }

    private static func audienceProblem(_ key: String) -> String? {
        do {
            _ = try AudienceKey(key)
            return nil
        } catch {
            return error.message
        }
    }

    /// Braze's `apple_push` object as the command's `alert` and, from
    /// `content-available`, its priority (5) unless `priority` says otherwise.
    static func notification(_ value: JSONValue, priority: JSONValue?) -> Result<(alert: JSONValue, priority: JSONValue?), Refusal> {
        guard case .object(let fields) = value else {
            return .failure(Refusal(problems: [Problem(pointer: "/notification", message: "expected Braze's apple_push object, got \(value.typeName)")]))
        }
        var problems: [Problem] = []
        for name in fields.keys.sorted() where !notificationFields.contains(name) {
            problems.append(Problem(
                pointer: JSONPointer.make(["notification", name]),
                message: "is not carried by a Live Activity push; LiveDispatch sends notification.alert, notification.sound and content-available's priority"))
        }
        var alert: [String: JSONValue] = [:]
        switch fields["alert"] {
        case .object(let members)?:
            for name in members.keys.sorted() where !alertFields.contains(name) {
                problems.append(Problem(
                    pointer: JSONPointer.make(["notification", "alert", name]),
                    message: "is not carried by a Live Activity alert, which has a title and a body (each text, or a *loc_key with *loc_args)"))
            }
            for (text, key, args) in [("title", "title_loc_key", "title_loc_args"), ("body", "loc_key", "loc_args")] {
                switch (members[text], members[key]) {
                case (let given?, nil):
                    if members[args] != nil {
                        problems.append(Problem(pointer: "/notification/alert/\(args)", message: "goes with \(key), not \(text)"))
                    }
                    alert[text] = given
                case (nil, let localized?):
                    var object: [String: JSONValue] = ["loc_key": localized]
                    if let arguments = members[args] { object["loc_args"] = arguments }
                    alert[text] = .object(object)
                case (.some, .some):
                    problems.append(Problem(pointer: "/notification/alert/\(key)", message: "give \(text) or \(key), not both"))
                case (nil, nil):
                    problems.append(Problem(pointer: "/notification/alert/\(text)", message: "is required: a Live Activity alert has a title and a body"))
                }
            }
        case .string?:
            problems.append(Problem(pointer: "/notification/alert", message: "a Live Activity alert has a title and a body: give {\"title\": …, \"body\": …}"))
        case nil, .null?:
            problems.append(Problem(pointer: "/notification/alert", message: "is required: a Live Activity alert has a title and a body"))
        case let other?:
            problems.append(Problem(pointer: "/notification/alert", message: "expected an object with title and body, got \(other.typeName)"))
        }
        if let sound = fields["sound"] {
            if case .string = sound { alert["sound"] = sound } else {
                problems.append(Problem(pointer: "/notification/sound", message: "expected the name of a sound file (a string), got \(sound.typeName)"))
            }
        }
        var derived: JSONValue?
        switch fields["content-available"] {
        case nil, .null?, .bool(false)?: break
        case .bool(true)?:
            // Braze sends a content-available push at APNs priority 5.
            if let priority, priority != .integer(5) {
                problems.append(Problem(pointer: "/priority", message: "notification.content-available asks for priority 5; give one or the other"))
            } else {
                derived = .integer(5)
            }
        case let other?: problems.append(Problem(pointer: "/notification/content-available", message: "expected true or false, got \(other.typeName)"))
        }
        return problems.isEmpty ? .success((.object(alert), derived)) : .failure(Refusal(problems: problems))
    }

    /// Where a field of the command came from in Braze's body.
    static func pointer(ofCommandField field: String) -> String {
        pointer(ofCommandComponents: field.split(separator: ".").flatMap { part in
            part.split(separator: "[").map { $0.hasSuffix("]") ? String($0.dropLast()) : String($0) }
        })
    }

    /// Where the command's field at a JSON pointer (`/app`) came from in
    /// Braze's body (`/app_id`); a parameter's pointer (`#/…`) as it is.
    static func pointer(ofCommandPointer pointer: String) -> String {
        if pointer == "#/parameters/activity_id" { return "/activity_id" }
        guard pointer.hasPrefix("/") else { return pointer }
        let components = pointer.dropFirst().split(separator: "/", omittingEmptySubsequences: false).map {
            $0.replacingOccurrences(of: "~1", with: "/").replacingOccurrences(of: "~0", with: "~")
        }
        return self.pointer(ofCommandComponents: components)
    }

    private static func pointer(ofCommandComponents components: [String]) -> String {
        var components = components
        switch components.first {
        case "attributes_type": components[0] = "activity_attributes_type"
        case "attributes": components[0] = "activity_attributes"
        case "audiences": components = ["external_user_ids"]
        case "alert": components = ["notification"] + components
        case "app": components = ["app_id"]
        case "id": return "#/parameters/Idempotency-Key"
        default: break
        }
        return JSONPointer.make(components)
    }
}

/// The `app_id` values the Braze-compatible routes accept, each naming a
/// configured app: the app's `braze_app_id` (its Braze app API
/// identifier), its name or its bundle id, tried in that order.
struct BrazeApps: Sendable, Hashable {
    struct App: Sendable, Hashable {
        var name: String
        var bundleID: String
        var brazeAppID: String
    }

    var apps: [App]

    init(_ apps: [App] = []) { self.apps = apps }

    /// The name of the app `appID` stands for, if any.
    func app(for appID: String) -> String? {
        (apps.first { !$0.brazeAppID.isEmpty && $0.brazeAppID == appID } ?? apps.first { $0.name == appID } ?? apps.first { $0.bundleID == appID })?.name
    }

    /// Why `appID` stands for no app.
    func unknown(_ appID: String) -> String {
        guard !apps.isEmpty else { return "no app is configured for the Braze-compatible routes" }
        let known = apps.map { app in
            ([app.brazeAppID, app.name, app.bundleID].filter { !$0.isEmpty }).joined(separator: " / ")
        }.joined(separator: ", ")
        return "\(String(appID.prefix(64)).debugDescription) is no app of this deployment: give an app's braze_app_id, name or bundle id (\(known))"
    }
}
