import LiveDispatchCore

/// Request headers laid out for `nghttp2_nv`: every name and value in one
/// byte buffer, with their ranges. The general form, for the rare requests
/// that have no ``HTTP2PushHeaderTemplate`` (channel management).
struct HTTP2HeaderBlock: Sendable {
    private(set) var storage: [UInt8] = []
    private(set) var fields: [HTTP2HeaderField] = []

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

    /// The block of `request` with its `authorization`: the fields of
    /// `APNsRequest.headers` plus `:authority` and `authorization`.
    init(_ request: APNsRequest, token: String, authority: String) {
        self.init(request.headers + [("authorization", "bearer " + token)], authority: authority)
    }

    private mutating func append(name: String, value: String) {
        let nameStart = storage.count
        storage.append(contentsOf: name.utf8)
        let valueStart = storage.count
        storage.append(contentsOf: value.utf8)
        fields.append(HTTP2HeaderField(name: nameStart..<valueStart, value: valueStart..<storage.count))
    }

    /// The headers back as strings, for tests and logs.
    var headers: [(name: String, value: String)] {
        fields.map { field in
            (String(decoding: storage[field.name], as: UTF8.self), String(decoding: storage[field.value], as: UTF8.self))
        }
    }
}
