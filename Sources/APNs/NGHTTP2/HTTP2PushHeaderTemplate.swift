import LiveDispatchCore

/// One request header as ranges of a byte buffer, and whether HPACK may
/// put it in the dynamic table.
struct HTTP2HeaderField: Sendable, Equatable {
    var name: Range<Int>
    var value: Range<Int>
    /// False for values unique to one request (`apns-id`, a `:path` with a
    /// device token): indexing them would only evict the fields every
    /// request repeats. Sent as "never indexed".
    var indexed = true
}

/// The request headers of pushes to one app over one connection, laid out
/// once: the fields every push repeats (`:method`, `:scheme`,
/// `:authority`, `apns-push-type`, `apns-topic`, `content-type`,
/// `authorization`, and every field name) stay in the buffer; each push
/// writes only its own values (`:path`, `apns-channel-id`,
/// `apns-priority`, `apns-expiration`, `apns-id`, `content-length`) over
/// the previous push's, in the same buffer.
///
/// The order is that of `APNsRequest.headers` with `:authority` after the
/// pseudo-headers and `authorization` last. Lives on its connection's event
/// loop; not for channel management requests (``HTTP2HeaderBlock``).
struct HTTP2PushHeaderTemplate {
    /// Device pushes and broadcasts carry different fields.
    enum Kind: Sendable, Equatable {
        /// `POST /3/device/<token>` with `apns-topic`.
        case device
        /// `POST /4/broadcasts/apps/<bundle>` with `apns-channel-id`.
        case channel
    }

    /// What the constant fields were made from.
    struct Key: Equatable {
        var kind: Kind
        var bundleID: String
        var pushType: String
        var token: String
        var authority: String
    }

    let key: Key
    /// Names and constant values, then the current push's values from
    /// ``constantBytes`` on.
    private(set) var storage: [UInt8] = []
    private(set) var fields: [HTTP2HeaderField] = []
    private var constantBytes = 0
    private var pathField = 0
    private var channelIDField: Int?
    private var priorityField = 0
    private var expirationField = 0
    private var apnsIDField = 0
    private var contentLengthField = 0

    /// The kind of template `request` uses; nil for channel management.
    static func kind(of request: APNsRequest) -> Kind? {
        switch request.destination {
        case .device: .device
        case .channel: .channel
        case .channelManagement: nil
        }
    }

    init(_ key: Key) {
        self.key = key
        storage.reserveCapacity(512 + key.token.utf8.count + 2 * key.bundleID.utf8.count)
        fields.reserveCapacity(12)
        constant(":method", "POST")
        constant(":scheme", "https")
        switch key.kind {
        case .device:
            pathField = varying(":path", indexed: false)
        case .channel:
            pathField = fields.count
            field(":path") { storage in
                storage.append(contentsOf: "/4/broadcasts/apps/".utf8)
                storage.append(contentsOf: key.bundleID.utf8)
            }
        }
        constant(":authority", key.authority)
        constant("apns-push-type", key.pushType)
        switch key.kind {
        case .device:
            field("apns-topic") { storage in
                storage.append(contentsOf: key.bundleID.utf8)
                if key.pushType == "liveactivity" { storage.append(contentsOf: ".push-type.liveactivity".utf8) }
            }
        case .channel:
            channelIDField = varying("apns-channel-id", indexed: true)
        }
        priorityField = varying("apns-priority", indexed: true)
        expirationField = varying("apns-expiration", indexed: true)
        apnsIDField = varying("apns-id", indexed: false)
        constant("content-type", "application/json")
        contentLengthField = varying("content-length", indexed: true)
        field("authorization") { storage in
            storage.append(contentsOf: "bearer ".utf8)
            storage.append(contentsOf: key.token.utf8)
        }
        constantBytes = storage.count
    }

    /// Writes the values of `request` (of this template's ``key``) over
    /// those of the previous push. Every varying field is written each
    /// time, so nothing of an earlier push remains.
    mutating func fill(_ request: APNsRequest) {
        storage.removeLast(storage.count - constantBytes)
        switch request.destination {
        case .device(let token):
            set(pathField) { storage in
                storage.append(contentsOf: "/3/device/".utf8)
                storage.appendHex(token.bytes)
            }
        case .channel(let channelID):
            if let channelIDField { set(channelIDField) { $0.append(contentsOf: channelID.utf8) } }
        case .channelManagement:
            break
        }
        set(priorityField) { $0.appendDecimal(request.priority.rawValue) }
        set(expirationField) { $0.appendDecimal(request.expiration?.wholeSeconds ?? 0) }
        set(apnsIDField) { $0.append(contentsOf: request.apnsID.utf8) }
        set(contentLengthField) { $0.appendDecimal(request.payload.count) }
    }

    /// The headers as strings with whether each may be indexed, for tests and logs.
    var headers: [(name: String, value: String, indexed: Bool)] {
        fields.map { field in
            (
                String(decoding: storage[field.name], as: UTF8.self), String(decoding: storage[field.value], as: UTF8.self),
                field.indexed
            )
        }
    }

    // MARK: Layout

    private mutating func constant(_ name: StaticString, _ value: String) {
        field(name) { $0.append(contentsOf: value.utf8) }
    }

    private mutating func field(_ name: StaticString, indexed: Bool = true, _ writeValue: (inout [UInt8]) -> Void) {
        let nameStart = storage.count
        name.withUTF8Buffer { storage.append(contentsOf: $0) }
        let valueStart = storage.count
        writeValue(&storage)
        fields.append(HTTP2HeaderField(name: nameStart..<valueStart, value: valueStart..<storage.count, indexed: indexed))
    }

    /// A field whose value each push writes; returns its index.
    private mutating func varying(_ name: StaticString, indexed: Bool) -> Int {
        field(name, indexed: indexed) { _ in }
        return fields.count - 1
    }

    private mutating func set(_ index: Int, _ writeValue: (inout [UInt8]) -> Void) {
        let start = storage.count
        writeValue(&storage)
        fields[index].value = start..<storage.count
    }
}

/// The push templates of one connection, a few apps at once (a connection
/// usually serves one app; a new provider token replaces its templates).
struct HTTP2PushHeaderTemplates {
    /// Templates kept; the least recently used one is replaced beyond it.
    static let capacity = 4

    private var templates: [HTTP2PushHeaderTemplate] = []

    /// Runs `body` with the filled template of `request`; nil for requests
    /// that have none (channel management).
    mutating func withHeaders<Result>(
        of request: APNsRequest, token: String, authority: String, _ body: (HTTP2PushHeaderTemplate) -> Result
    ) -> Result? {
        guard let kind = HTTP2PushHeaderTemplate.kind(of: request) else { return nil }
        var index = templates.firstIndex {
            $0.key.kind == kind && $0.key.bundleID == request.bundleID && $0.key.pushType == request.pushType
                && $0.key.token == token && $0.key.authority == authority
        }
        if index == nil {
            let key = HTTP2PushHeaderTemplate.Key(
                kind: kind, bundleID: request.bundleID, pushType: request.pushType, token: token, authority: authority)
            // A template of the same app and kind is of an older token: replace it.
            let stale = templates.firstIndex {
                $0.key.kind == kind && $0.key.bundleID == request.bundleID && $0.key.pushType == request.pushType
            }
            if let stale {
                templates[stale] = HTTP2PushHeaderTemplate(key)
            } else {
                if templates.count == Self.capacity { templates.removeLast() }
                templates.append(HTTP2PushHeaderTemplate(key))
            }
            index = stale ?? templates.count - 1
        }
        guard var found = index else { return nil }
        if found != 0 {
            templates.swapAt(0, found)
            found = 0
        }
        templates[found].fill(request)
        return body(templates[found])
    }

    var count: Int { templates.count }
}

extension [UInt8] {
    /// Appends `value` in decimal ASCII.
    mutating func appendDecimal(_ value: some BinaryInteger) {
        if value < 0 { append(UInt8(ascii: "-")) }
        // Digits right to left on the stack (a 128-bit magnitude has at most
        // 39), then appended at once.
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 40) { digits in
            var start = digits.count
            var rest = value.magnitude
            repeat {
                start -= 1
                digits.initializeElement(at: start, to: UInt8(ascii: "0") + UInt8(truncatingIfNeeded: rest % 10))
                rest /= 10
            } while rest > 0 && start > 0
            append(contentsOf: UnsafeBufferPointer(rebasing: digits[start...]))
        }
    }

    /// Appends `bytes` in lowercase hex.
    mutating func appendHex(_ bytes: [UInt8]) {
        let digits: StaticString = "0123456789abcdef"
        digits.withUTF8Buffer { digits in
            // Written on the stack first, so the buffer grows at most once.
            withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 2 * bytes.count) { hex in
                for (index, byte) in bytes.enumerated() {
                    hex.initializeElement(at: 2 * index, to: digits[Int(byte >> 4)])
                    hex.initializeElement(at: 2 * index + 1, to: digits[Int(byte & 0x0f)])
                }
                append(contentsOf: hex)
            }
        }
    }
}
