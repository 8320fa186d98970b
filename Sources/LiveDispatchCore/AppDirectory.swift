/// The apps one deployment sends for (`apps:` in the configuration), as the
/// records see them: a name and the environment of its tokens that name
/// none. A token registration or command names its app in `app`; without
/// one it belongs to the only app, and with several apps a registration or
/// a start must name it.
public struct AppDirectory: Sendable, Hashable {
    public struct App: Sendable, Hashable {
        public var name: String
        /// The environment of this app's tokens registered without one.
        public var environment: APNsEnvironment

        public init(name: String, environment: APNsEnvironment = .production) {
            self.name = name
            self.environment = environment
        }
    }

    /// In configuration order.
    public var apps: [App]

    public init(_ apps: [App]) { self.apps = apps }

    /// No app known: names are checked for shape only and not resolved
    /// (unit tests of the machines; a worker always knows its apps).
    public static let unchecked = AppDirectory([])

    /// The name of the app configured from the single-app `apns:` keys.
    public static let defaultName = "default"

    /// Longest app name, in UTF-8 bytes.
    public static let maxNameBytes = 64

    /// Why `name` cannot name an app, or nil: 1 to 64 letters, digits, `-`,
    /// `_` or `.`, so it reads the same in YAML, JSON, metrics and
    /// environment variable names.
    public static func nameProblem(_ name: String) -> String? {
        let allowed = name.unicodeScalars.allSatisfy {
            $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || $0 == "-" || $0 == "_" || $0 == ".")
        }
        guard !name.isEmpty, name.utf8.count <= maxNameBytes, allowed else {
            return "\(name.debugDescription) is not an app name (1 to \(maxNameBytes) letters, digits, -, _ or .)"
        }
        return nil
    }

    /// The app `named` (a record's `app`), or the only app when it names
    /// none; nil when no app is known (``unchecked``). Records keep the name
    /// as written: one naming none stays without, for the only app. `required` makes a
    /// missing name an error with several apps; `field` is the field the
    /// error names.
    public func resolve(_ named: String?, field: String = "app", required: Bool = true) throws(FieldError) -> App? {
        guard !apps.isEmpty else { return nil }
        let names = apps.map(\.name).joined(separator: ", ")
        guard let named else {
            if apps.count == 1 { return apps[0] }
            guard required else { return nil }
            throw FieldError(field: field, message: "is required: this deployment sends for several apps (\(names))")
        }
        guard let app = apps.first(where: { $0.name == named }) else {
            throw FieldError(field: field, message: "\(named.debugDescription) is not an app of this deployment (known: \(names))")
        }
        return app
    }

    /// The app a stored record of an earlier configuration belongs to when
    /// it names none or an app no longer configured: the first app.
    public func restored(_ named: String?) -> String? {
        guard let first = apps.first else { return named }
        return apps.first { $0.name == named }?.name ?? first.name
    }
}

extension FieldReader {
    /// An optional `app` field, checked for shape.
    func appName(_ key: String = "app") throws(FieldError) -> String? {
        guard let name = try string(key) else { return nil }
        if let problem = AppDirectory.nameProblem(name) { throw FieldError(field: self.name(key), message: problem) }
        return name
    }
}
