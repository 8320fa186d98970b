import LiveDispatchCore

/// Request headers laid out for `nghttp2_nv`: every name and value in one
/// byte buffer, with their ranges. Built on the caller's thread so the event
/// loop only points nghttp2 at it.
struct HTTP2HeaderBlock: Sendable {
    private(set) var storage: [UInt8] = []
    private(set) var fields: [(name: Range<Int>, value: Range<Int>)] = []

    /// `headers` in order, with `authority` inserted as `:authority` after
    /// the other pseudo-headers.
    init(_ headers: [(name: String, value: String)], authority: String) {
        storage.reserveCapacity(headers.reduce(authority.utf8.count + 10) { $0 + $1.name.utf8.count + $1.value.utf8.count })
        fields.reserveCapacity(headers.count + 1)
        var authorityAdded = false
        for header in headers {
            if !authorityAdded && !header.name.hasPrefix(":") {
                append(name: ":authority", value: authority)
                authorityAdded = true
            }
            append(name: header.name, value: header.value)
        }
        if !authorityAdded { append(name: ":authority", value: authority) }
    }

    /// The block of an APNs request with its `authorization`: the same
    /// fields, in the same order, as `APNsRequest.headers` plus
    /// `:authority` and `authorization`, written straight into the buffer
    /// without a string per field (this runs once per push).
    init(_ request: APNsRequest, token: String, authority: String) {
        if case .channelManagement = request.destination {
            // Rare requests: the general form is good enough.
            self.init(request.headers + [("authorization", "bearer " + token)], authority: authority)
        } else {
            self.init(push: request, token: token, authority: authority)
        }
    }

    private init(push request: APNsRequest, token: String, authority: String) {
        storage.reserveCapacity(400 + token.utf8.count + request.bundleID.utf8.count)
        fields.reserveCapacity(12)
        append(name: ":method", value: "POST")
        append(name: ":scheme", value: "https")
        field(":path") { storage in
            switch request.destination {
            case .device(let token):
                storage.append(contentsOf: "/3/device/".utf8)
                // Written on the stack first, so the buffer grows once.
                let digits: StaticString = "0123456789abcdef"
                digits.withUTF8Buffer { digits in
                    withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 2 * token.count) { hex in
                        var position = 0
                        token.forEachByte { byte in
                            hex.initializeElement(at: position, to: digits[Int(byte >> 4)])
                            hex.initializeElement(at: position + 1, to: digits[Int(byte & 0x0f)])
                            position += 2
                        }
                        storage.append(contentsOf: hex)
                    }
                }
            case .channel:
                storage.append(contentsOf: "/4/broadcasts/apps/".utf8)
                storage.append(contentsOf: request.bundleID.utf8)
            case .channelManagement(let operation):
                storage.append(contentsOf: operation.path(bundleID: request.bundleID).utf8)
            }
        }
        append(name: ":authority", value: authority)
        append(name: "apns-push-type", value: request.pushType)
        switch request.destination {
        case .device:
            field("apns-topic") { storage in
                storage.append(contentsOf: request.bundleID.utf8)
                if request.pushType == "liveactivity" { storage.append(contentsOf: ".push-type.liveactivity".utf8) }
            }
        case .channel(let channelID), .channelManagement(.read(let channelID)), .channelManagement(.delete(let channelID)):
            append(name: "apns-channel-id", value: channelID)
        case .channelManagement(.create), .channelManagement(.list):
            break
        }
        field("apns-priority") { $0.appendDecimal(request.priority.rawValue) }
        field("apns-expiration") { $0.appendDecimal(request.expiration?.wholeSeconds ?? 0) }
        append(name: "apns-id", value: request.apnsID)
        append(name: "content-type", value: "application/json")
        field("content-length") { $0.appendDecimal(request.payload.count) }
        field("authorization") { storage in
            storage.append(contentsOf: "bearer ".utf8)
            storage.append(contentsOf: token.utf8)
        }
    }

    /// Appends a field whose value `writeValue` writes.
    private mutating func field(_ name: StaticString, _ writeValue: (inout [UInt8]) -> Void) {
        let nameStart = storage.count
        name.withUTF8Buffer { storage.append(contentsOf: $0) }
        let valueStart = storage.count
        writeValue(&storage)
        fields.append((nameStart..<valueStart, valueStart..<storage.count))
    }

    private mutating func append(name: String, value: String) {
        let nameStart = storage.count
        storage.append(contentsOf: name.utf8)
        let valueStart = storage.count
        storage.append(contentsOf: value.utf8)
        fields.append((nameStart..<valueStart, valueStart..<storage.count))
    }

    /// The headers back as strings, for tests and logs.
    var headers: [(name: String, value: String)] {
        fields.map { field in
            (String(decoding: storage[field.name], as: UTF8.self), String(decoding: storage[field.value], as: UTF8.self))
        }
    }
}

extension [UInt8] {
    /// Appends `value` in decimal ASCII.
    fileprivate mutating func appendDecimal(_ value: some BinaryInteger) {
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
}
