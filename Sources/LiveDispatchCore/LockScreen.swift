/// Renders what an activity's Lock Screen presentation would show for a
/// state, for the demo's terminal output and the web console's preview: the
/// shipped activity types get their own layout, any other type a compact
/// list of its fields.
public enum LockScreen {
    public static func render(_ state: ActivityState) -> String {
        let content = state.contentState
        switch state.attributesType {
        case "SportsActivityAttributes":
            return renderMatch(content, attributes: state.attributes)
        case "DeliveryActivityAttributes":
            return renderDelivery(content)
        default:
            if content["teamOneScore"] != nil { return renderMatch(content, attributes: state.attributes) }
            if content["minutesUntilArrival"] != nil { return renderDelivery(content) }
            return renderFields(content)
        }
    }

    static func renderMatch(_ content: JSONValue, attributes: JSONValue?) -> String {
        let home = attributes?["teamOneName"]?.stringValue ?? "Home"
        let away = attributes?["teamTwoName"]?.stringValue ?? "Away"
        var line = "\(home) \(text(content["teamOneScore"])) – \(text(content["teamTwoScore"])) \(away)"
        if let period = content["period"]?.stringValue { line += " · \(period.spacedOut)" }
        if let minute = content["minute"]?.integerValue, content["period"]?.stringValue != "full_time" { line += " \(minute)'" }
        if let scorer = content["lastScorer"]?.stringValue { line += " · last goal: \(scorer)" }
        return line
    }

    static func renderDelivery(_ content: JSONValue) -> String {
        var parts: [String] = []
        if let status = content["status"]?.stringValue { parts.append(status.spacedOut.capitalizedFirst) }
        if let driver = content["driverName"]?.stringValue { parts.append(driver) }
        if let minutes = content["minutesUntilArrival"]?.integerValue, content["status"]?.stringValue != "delivered" {
            parts.append(minutes == 1 ? "1 min" : "\(minutes) min")
        }
        return parts.joined(separator: " · ")
    }

    static func renderFields(_ content: JSONValue) -> String {
        guard let fields = content.objectValue, !fields.isEmpty else { return "(empty state)" }
        return fields.keys.sorted().map { "\($0): \(text(fields[$0]))" }.joined(separator: " · ")
    }

    static func text(_ value: JSONValue?) -> String {
        guard let value else { return "–" }
        if case .string(let string) = value { return string }
        return value.serializedString()
    }
}

extension String {
    /// `second_half` as `second half`.
    fileprivate var spacedOut: String { String(map { $0 == "_" ? " " : $0 }) }
    fileprivate var capitalizedFirst: String { prefix(1).uppercased() + dropFirst() }
}
