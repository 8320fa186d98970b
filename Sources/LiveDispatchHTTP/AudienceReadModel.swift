import LiveDispatchCore

/// What Kafka holds of one audience: its push-to-start registrations on
/// `token-store` (key: audience, U+001E, token), read in offset order from
/// the audience's partition; the latest record of each token wins and a
/// tombstone removes it.
struct AudienceReadModel: Sendable {
    let audience: AudienceKey
    /// Registrations by token (hex), with the worker's `started` ledger.
    private(set) var tokens: [String: PushToStartRegistration] = [:]
    private(set) var ledgers: [String: PushToStartBudget.Ledger] = [:]

    init(audience: AudienceKey) { self.audience = audience }

    /// Takes one record of the audience's `token-store` partition.
    mutating func tokenStoreRecord(key: [UInt8]?, value: [UInt8]?) {
        guard let key else { return }
        let text = String(decoding: key, as: UTF8.self)
        let prefix = audience.rawValue + "\u{1E}"
        guard text.hasPrefix(prefix) else { return }
        let token = String(text.dropFirst(prefix.count))
        guard let value, case .object(var fields)? = try? JSONValue.parse(value) else {
            tokens[token] = nil
            ledgers[token] = nil
            return
        }
        let started = fields.removeValue(forKey: "started")
        // Stored by the worker, so read without the app directory; one that
        // does not read is left out rather than shown wrong.
        guard let registration = try? PushToStartRegistration(json: .object(fields)), registration.action == .register else {
            tokens[token] = nil
            ledgers[token] = nil
            return
        }
        tokens[token] = registration
        ledgers[token] = started.map(PushToStartBudget.Ledger.init(json:))
    }

    /// Up to `limit` tokens after `cursor`, sorted, and the cursor of the
    /// next page (nil on the last).
    func page(after cursor: String?, limit: Int) -> (page: ArraySlice<String>, next: String?) {
        tokens.keys.sorted().page(after: cursor, limit: limit)
    }
}
