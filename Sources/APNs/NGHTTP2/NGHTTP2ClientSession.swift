import CNghttp2

/// What an HTTP/2 client session reports after reading bytes from the server.
/// Callbacks from nghttp2 only record events; the owner handles them after
/// `receive` returns, so no Swift code runs re-entrantly inside nghttp2.
enum HTTP2SessionEvent: Sendable, Equatable {
    /// A response's `:status`.
    case status(streamID: Int32, status: Int)
    /// A response's `apns-id`.
    case apnsID(streamID: Int32, value: String)
    /// Another response header the client reads (`apns-unique-id`,
    /// `retry-after`, `apns-channel-id`, `apns-request-id`).
    case header(streamID: Int32, name: String, value: String)
    /// A chunk of a response body.
    case data(streamID: Int32, bytes: [UInt8])
    /// A stream ended; `errorCode` is 0 (`NO_ERROR`) when it completed normally.
    case streamClosed(streamID: Int32, errorCode: UInt32)
    /// The server's SETTINGS arrived; its current stream limit.
    case settings(maxConcurrentStreams: Int)
    /// The server sent GOAWAY: streams above `lastStreamID` were not processed.
    case goaway(lastStreamID: Int32, errorCode: UInt32, debugData: [UInt8])
    /// The server acknowledged one of our PINGs.
    case pingAcknowledged
}

/// An error nghttp2 returned, with its library message.
struct HTTP2SessionError: Error, Sendable, CustomStringConvertible {
    var code: Int
    var operation: String
    var description: String {
        let message = String(cString: nghttp2_strerror(Int32(truncatingIfNeeded: code)))
        return "nghttp2 \(operation) failed: \(message) (\(code))"
    }
}

/// One `nghttp2_session` in client mode, fed by memory buffers.
///
/// Not thread-safe and not `Sendable`: it is created, used and closed on its
/// channel's event loop only. nghttp2's `user_data` is an `Unmanaged`
/// retained reference to this object, released by ``close()``, so callbacks
/// never see a dangling pointer while the session exists.
final class NGHTTP2ClientSession {
    /// Error code of a stream the server refused before processing it.
    static let refusedStream: UInt32 = NGHTTP2_REFUSED_STREAM.rawValue
    /// Error code used to cancel a stream whose caller gave up.
    static let cancel: UInt32 = NGHTTP2_CANCEL.rawValue

    private var session: OpaquePointer?
    private var events: [HTTP2SessionEvent] = []
    /// Request bodies not yet fully handed to nghttp2, by stream.
    private var bodies: [Int32: (bytes: [UInt8], offset: Int)] = [:]
    private var retained: Unmanaged<NGHTTP2ClientSession>?

    init(initialWindowSize: Int = 1 << 20) throws(HTTP2SessionError) {
        var callbacks: OpaquePointer?
        var rc = nghttp2_session_callbacks_new(&callbacks)
        guard rc == 0, let callbacks else { throw HTTP2SessionError(code: Int(rc), operation: "callbacks_new") }
        defer { nghttp2_session_callbacks_del(callbacks) }
        nghttp2_session_callbacks_set_on_header_callback(callbacks, onHeader)
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks, onDataChunk)
        nghttp2_session_callbacks_set_on_stream_close_callback(callbacks, onStreamClose)
        nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks, onFrameReceived)

        let unmanaged = Unmanaged.passRetained(self)
        var session: OpaquePointer?
        rc = nghttp2_session_client_new(&session, callbacks, unmanaged.toOpaque())
        guard rc == 0, let session else {
            unmanaged.release()
            throw HTTP2SessionError(code: Int(rc), operation: "session_client_new")
        }
        self.session = session
        self.retained = unmanaged

        var settings = [
            nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_ENABLE_PUSH.rawValue), value: 0),
            nghttp2_settings_entry(
                settings_id: Int32(NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE.rawValue), value: UInt32(initialWindowSize)),
        ]
        rc = nghttp2_submit_settings(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), &settings, settings.count)
        guard rc == 0 else {
            close()
            throw HTTP2SessionError(code: Int(rc), operation: "submit_settings")
        }
    }

    deinit {
        if let session { nghttp2_session_del(session) }
    }

    /// Deletes the session and releases the callbacks' reference. Idempotent.
    func close() {
        if let session { nghttp2_session_del(session) }
        session = nil
        bodies.removeAll()
        retained?.release()
        retained = nil
    }

    var isOpen: Bool { session != nil }

    /// The server's announced `SETTINGS_MAX_CONCURRENT_STREAMS`.
    var remoteMaxConcurrentStreams: Int {
        guard let session else { return 0 }
        return Int(nghttp2_session_get_remote_settings(session, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS))
    }

    /// Whether the session still wants to read or write; when neither, the
    /// connection is finished (both sides sent GOAWAY and streams are done).
    var isActive: Bool {
        guard let session else { return false }
        return nghttp2_session_want_read(session) != 0 || nghttp2_session_want_write(session) != 0
    }

    /// Queues a request whose headers are `fields` of `storage`; returns
    /// its stream id. nghttp2 copies the headers; `body` is kept (not
    /// copied) until nghttp2 has read it.
    func submitRequest(storage: [UInt8], fields: [HTTP2HeaderField], body: [UInt8]) throws(HTTP2SessionError) -> Int32 {
        guard let session else { throw HTTP2SessionError(code: Int(NGHTTP2_ERR_INVALID_STATE.rawValue), operation: "submit_request") }
        // nghttp2 copies names and values (no NO_COPY flag) and never writes
        // through these pointers; the vector lives on the stack.
        let streamID: Int32 = storage.withUnsafeBufferPointer { buffer in
            guard let base = buffer.baseAddress.map({ UnsafeMutablePointer(mutating: $0) }) else {
                return NGHTTP2_ERR_NOMEM.rawValue
            }
            return withUnsafeTemporaryAllocation(of: nghttp2_nv.self, capacity: fields.count) { nva in
                for (index, field) in fields.enumerated() {
                    nva.initializeElement(
                        at: index,
                        to: nghttp2_nv(
                            name: base + field.name.lowerBound, value: base + field.value.lowerBound,
                            namelen: field.name.count, valuelen: field.value.count,
                            flags: field.indexed ? Self.indexed : Self.notIndexed))
                }
                var provider = nghttp2_data_provider(source: nghttp2_data_source(ptr: nil), read_callback: readBodyCallback)
                return nghttp2_submit_request(session, nil, nva.baseAddress, nva.count, &provider, nil)
            }
        }
        guard streamID > 0 else { throw HTTP2SessionError(code: Int(streamID), operation: "submit_request") }
        bodies[streamID] = (body, 0)
        return streamID
    }

    private static let indexed = UInt8(NGHTTP2_NV_FLAG_NONE.rawValue)
    private static let notIndexed = UInt8(NGHTTP2_NV_FLAG_NO_INDEX.rawValue)

    /// Resets a stream (the caller gave up on it).
    func resetStream(_ streamID: Int32, errorCode: UInt32) {
        guard let session else { return }
        _ = nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), streamID, errorCode)
        bodies[streamID] = nil
    }

    /// Queues a PING.
    func submitPing() throws(HTTP2SessionError) {
        guard let session else { throw HTTP2SessionError(code: Int(NGHTTP2_ERR_INVALID_STATE.rawValue), operation: "submit_ping") }
        let rc = nghttp2_submit_ping(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), nil)
        guard rc == 0 else { throw HTTP2SessionError(code: Int(rc), operation: "submit_ping") }
    }

    /// Queues a GOAWAY telling the server we open no more streams.
    func submitGoaway() {
        guard let session else { return }
        _ = nghttp2_session_terminate_session(session, NGHTTP2_NO_ERROR.rawValue)
    }

    /// Feeds bytes read from the socket; returns the events they produced.
    func receive(_ bytes: UnsafeRawBufferPointer) throws(HTTP2SessionError) -> [HTTP2SessionEvent] {
        guard let session else { throw HTTP2SessionError(code: Int(NGHTTP2_ERR_INVALID_STATE.rawValue), operation: "mem_recv") }
        guard let base = bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), bytes.count > 0 else { return [] }
        let consumed = nghttp2_session_mem_recv(session, base, bytes.count)
        let produced = events
        events.removeAll(keepingCapacity: true)
        guard consumed >= 0 else { throw HTTP2SessionError(code: consumed, operation: "mem_recv") }
        return produced
    }

    /// Serialises every pending frame, handing each chunk to `write`.
    /// Stream-close events produced while sending (a reset of our own) are returned.
    func send(_ write: (UnsafeRawBufferPointer) -> Void) throws(HTTP2SessionError) -> [HTTP2SessionEvent] {
        guard let session else { return [] }
        while true {
            var chunk: UnsafePointer<UInt8>?
            let length = nghttp2_session_mem_send(session, &chunk)
            if length < 0 { throw HTTP2SessionError(code: length, operation: "mem_send") }
            guard length > 0, let chunk else { break }
            write(UnsafeRawBufferPointer(start: chunk, count: length))
        }
        let produced = events
        events.removeAll(keepingCapacity: true)
        return produced
    }

    // MARK: Callback targets

    fileprivate func record(_ event: HTTP2SessionEvent) { events.append(event) }

    fileprivate func readBody(streamID: Int32, into buffer: UnsafeMutablePointer<UInt8>, length: Int) -> (Int, eof: Bool) {
        guard let body = bodies[streamID] else { return (0, true) }
        let count = min(length, body.bytes.count - body.offset)
        body.bytes.withUnsafeBufferPointer { source in
            if count > 0, let start = source.baseAddress { buffer.update(from: start + body.offset, count: count) }
        }
        let offset = body.offset + count
        if offset >= body.bytes.count {
            bodies[streamID] = nil
            return (count, true)
        }
        bodies[streamID] = (body.bytes, offset)
        return (count, false)
    }

    fileprivate func frameReceived(_ frame: UnsafePointer<nghttp2_frame>) {
        let type = UInt32(frame.pointee.hd.type)
        let flags = UInt32(frame.pointee.hd.flags)
        switch type {
        case NGHTTP2_SETTINGS.rawValue where flags & NGHTTP2_FLAG_ACK.rawValue == 0:
            record(.settings(maxConcurrentStreams: remoteMaxConcurrentStreams))
        case NGHTTP2_GOAWAY.rawValue:
            let goaway = frame.pointee.goaway
            var debug: [UInt8] = []
            if let data = goaway.opaque_data, goaway.opaque_data_len > 0 {
                debug = Array(UnsafeBufferPointer(start: data, count: min(goaway.opaque_data_len, 4096)))
            }
            record(.goaway(lastStreamID: goaway.last_stream_id, errorCode: goaway.error_code, debugData: debug))
        case NGHTTP2_PING.rawValue where flags & NGHTTP2_FLAG_ACK.rawValue != 0:
            record(.pingAcknowledged)
        default:
            break
        }
    }
}

private func session(from userData: UnsafeMutableRawPointer?) -> NGHTTP2ClientSession? {
    guard let userData else { return nil }
    return Unmanaged<NGHTTP2ClientSession>.fromOpaque(userData).takeUnretainedValue()
}

/// Response headers the client reads besides `:status` and `apns-id`;
/// others (`date`, `server`, …) are skipped before any string is made.
private let otherWantedHeaders: [[UInt8]] = ["apns-unique-id", "retry-after", "apns-channel-id", "apns-request-id"].map { Array($0.utf8) }
private let statusName = Array(":status".utf8)
private let apnsIDName = Array("apns-id".utf8)

private func equals(_ name: UnsafeBufferPointer<UInt8>, _ wanted: [UInt8]) -> Bool {
    wanted.count == name.count && wanted.elementsEqual(name)
}

/// A three-digit `:status` as a number; nil for anything else.
private func parseStatus(_ value: UnsafeBufferPointer<UInt8>) -> Int? {
    guard value.count == 3 else { return nil }
    var status = 0
    for byte in value {
        guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
        status = status * 10 + Int(byte - UInt8(ascii: "0"))
    }
    return status
}

private let onHeader: nghttp2_on_header_callback = { _, frame, name, nameLength, value, valueLength, _, userData in
    guard let owner = session(from: userData), let frame, let name, let value else { return 0 }
    let streamID = frame.pointee.hd.stream_id
    let nameBytes = UnsafeBufferPointer(start: name, count: nameLength)
    let valueBytes = UnsafeBufferPointer(start: value, count: valueLength)
    if equals(nameBytes, statusName) {
        // nghttp2 has checked that it is three digits; anything else is no answer.
        if let status = parseStatus(valueBytes) { owner.record(.status(streamID: streamID, status: status)) }
    } else if equals(nameBytes, apnsIDName) {
        owner.record(.apnsID(streamID: streamID, value: String(decoding: valueBytes, as: UTF8.self)))
    } else if otherWantedHeaders.contains(where: { equals(nameBytes, $0) }) {
        owner.record(
            .header(
                streamID: streamID, name: String(decoding: nameBytes, as: UTF8.self),
                value: String(decoding: valueBytes, as: UTF8.self)))
    }
    return 0
}

private let onDataChunk: nghttp2_on_data_chunk_recv_callback = { _, _, streamID, data, length, userData in
    guard let owner = session(from: userData), let data else { return 0 }
    owner.record(.data(streamID: streamID, bytes: Array(UnsafeBufferPointer(start: data, count: length))))
    return 0
}

private let onStreamClose: nghttp2_on_stream_close_callback = { _, streamID, errorCode, userData in
    session(from: userData)?.record(.streamClosed(streamID: streamID, errorCode: errorCode))
    return 0
}

private let onFrameReceived: nghttp2_on_frame_recv_callback = { _, frame, userData in
    guard let owner = session(from: userData), let frame else { return 0 }
    owner.frameReceived(frame)
    return 0
}

private let readBodyCallback: nghttp2_data_source_read_callback = { _, streamID, buffer, length, flags, _, userData in
    guard let owner = session(from: userData), let buffer, let flags else {
        return Int(NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue)
    }
    let (count, eof) = owner.readBody(streamID: streamID, into: buffer, length: length)
    if eof { flags.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue }
    return count
}
