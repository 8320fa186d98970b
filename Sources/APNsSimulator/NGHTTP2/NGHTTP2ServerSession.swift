import CNghttp2

/// What an `nghttp2_session` in server mode reported while it read bytes:
/// the nghttp2 callbacks turned into Swift values, in the order they fired.
enum HTTP2ServerEvent {
    /// A client opened a request stream (its HEADERS began).
    case streamOpened(Int32)
    /// The request's header block, complete.
    case headers(stream: Int32, HeaderBlock)
    /// A chunk of a request body.
    case data(stream: Int32, bytes: [UInt8])
    /// The request is complete (END_STREAM seen).
    case requestComplete(Int32)
    /// The stream is closed, with the HTTP/2 error code (0 = NO_ERROR).
    case streamClosed(Int32, errorCode: UInt32)
    /// The peer acknowledged our SETTINGS.
    case settingsAcknowledged
}

/// HTTP/2 error codes the simulator sends.
enum HTTP2ErrorCode: UInt32 {
    case noError = 0
    case protocolError = 1
    case internalError = 2
    case refusedStream = 7
}

/// One server-side `nghttp2_session`, fed with `receive` and drained with
/// `nextOutput`. Not thread-safe: the owning channel handler touches it only
/// on its event loop.
final class NGHTTP2ServerSession {
    private var session: OpaquePointer?
    /// Events collected by the callbacks during one `receive`.
    fileprivate var events: [HTTP2ServerEvent] = []
    /// The request header block being received. HTTP/2 sends a header
    /// block without interleaving, so there is at most one.
    fileprivate var headerBlock: (stream: Int32, block: HeaderBlock)?
    /// Response bodies waiting to be read by nghttp2's data provider.
    fileprivate var bodies: [Int32: (bytes: [UInt8], offset: Int)] = [:]
    /// RST_STREAM frames this side submitted on purpose, so those nghttp2
    /// sends by itself (limit exceeded, protocol errors) can be told apart.
    fileprivate var submittedResets: Set<Int32> = []
    /// RST_STREAM frames nghttp2 sent on its own: mostly streams refused
    /// because the client opened them before it learnt a lower limit.
    private(set) var automaticResets = 0
    /// GOAWAY frames nghttp2 sent on its own: a stream opened beyond a
    /// limit the client had acknowledged, or another protocol error.
    private(set) var automaticGoAways = 0
    /// Whether this side submitted a GOAWAY.
    fileprivate var submittedGoAway = false

    /// Creates a server session and queues the initial SETTINGS frame with
    /// `maxConcurrentStreams`.
    init(maxConcurrentStreams: UInt32) throws(SimulatorError) {
        var callbacks: OpaquePointer?
        guard nghttp2_session_callbacks_new(&callbacks) == 0, let callbacks else {
            throw .http2("nghttp2_session_callbacks_new failed: out of memory")
        }
        defer { nghttp2_session_callbacks_del(callbacks) }
        nghttp2_session_callbacks_set_on_begin_headers_callback(callbacks, onBeginHeaders)
        nghttp2_session_callbacks_set_on_header_callback(callbacks, onHeader)
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks, onDataChunk)
        nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks, onFrameReceived)
        nghttp2_session_callbacks_set_on_frame_send_callback(callbacks, onFrameSent)
        nghttp2_session_callbacks_set_on_stream_close_callback(callbacks, onStreamClose)

        var created: OpaquePointer?
        let result = nghttp2_session_server_new(&created, callbacks, Unmanaged.passUnretained(self).toOpaque())
        guard result == 0, let created else {
            throw .http2("nghttp2_session_server_new failed: \(Self.describe(result))")
        }
        session = created
        try submitSettings(maxConcurrentStreams: maxConcurrentStreams)
    }

    deinit {
        if let session { nghttp2_session_del(session) }
    }

    /// Feeds bytes read from the connection; what happened is then in ``takeEvents()``.
    func receive(_ bytes: UnsafeRawBufferPointer) throws(SimulatorError) {
        guard let session else { throw .http2("the HTTP/2 session is closed") }
        guard let base = bytes.baseAddress?.assumingMemoryBound(to: UInt8.self) else { return }
        let consumed = nghttp2_session_mem_recv(session, base, bytes.count)
        if consumed < 0 {
            throw .http2("nghttp2_session_mem_recv failed: \(Self.describe(Int32(truncatingIfNeeded: consumed)))")
        }
    }

    /// The events reported since the last call, by reads and by sends
    /// (a stream closes when its response has been sent).
    func takeEvents() -> [HTTP2ServerEvent] {
        defer { events.removeAll(keepingCapacity: true) }
        return events
    }

    /// Calls `write` with each chunk of frames nghttp2 has to send, until
    /// none is left. The chunk is valid only during the call.
    func drainOutput(_ write: (UnsafeRawBufferPointer) -> Void) throws(SimulatorError) {
        guard let session else { return }
        while true {
            var data: UnsafePointer<UInt8>?
            let length = nghttp2_session_mem_send(session, &data)
            if length < 0 {
                throw .http2("nghttp2_session_mem_send failed: \(Self.describe(Int32(truncatingIfNeeded: length)))")
            }
            guard length > 0, let data else { return }
            write(UnsafeRawBufferPointer(start: data, count: length))
        }
    }

    /// Whether nghttp2 has frames to send.
    var hasPendingOutput: Bool {
        guard let session else { return false }
        return nghttp2_session_want_write(session) != 0
    }

    /// Whether nghttp2 still wants to read or write; false once a GOAWAY
    /// has been exchanged and every stream is closed.
    var isActive: Bool {
        guard let session else { return false }
        return nghttp2_session_want_read(session) != 0 || nghttp2_session_want_write(session) != 0
    }

    /// Queues a SETTINGS frame announcing `SETTINGS_MAX_CONCURRENT_STREAMS`.
    func submitSettings(maxConcurrentStreams: UInt32) throws(SimulatorError) {
        guard let session else { return }
        var entry = nghttp2_settings_entry(
            settings_id: Int32(NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS.rawValue), value: maxConcurrentStreams)
        let result = nghttp2_submit_settings(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), &entry, 1)
        guard result == 0 else { throw .http2("nghttp2_submit_settings failed: \(Self.describe(result))") }
    }

    /// Queues a response: `:status`, the headers, and the body (none when empty).
    /// Returns false when the stream is already gone.
    @discardableResult
    func submitResponse(stream: Int32, status: Int, headers: [(String, String)], body: [UInt8]) -> Bool {
        guard let session else { return false }
        var fields: [(String, String)] = [(":status", String(status))]
        fields.append(contentsOf: headers)
        if !body.isEmpty { fields.append(("content-length", String(body.count))) }
        // nghttp2 copies the name/value pairs during the call, so the
        // pointers only have to live as long as this closure.
        var result: Int32 = 0
        withNameValuePairs(fields) { nva in
            if body.isEmpty {
                result = nghttp2_submit_response(session, stream, nva.baseAddress, nva.count, nil)
            } else {
                bodies[stream] = (body, 0)
                var provider = nghttp2_data_provider()
                provider.read_callback = readBody
                result = nghttp2_submit_response(session, stream, nva.baseAddress, nva.count, &provider)
                if result != 0 { bodies[stream] = nil }
            }
        }
        return result == 0
    }

    /// Resets a stream with `code` (REFUSED_STREAM tells the client it may retry).
    func submitReset(stream: Int32, code: HTTP2ErrorCode) {
        guard let session else { return }
        submittedResets.insert(stream)
        _ = nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), stream, code.rawValue)
    }

    /// Queues a GOAWAY frame: streams above `lastStreamID` will not be processed.
    func submitGoAway(lastStreamID: Int32, code: HTTP2ErrorCode, debugData: [UInt8]) throws(SimulatorError) {
        guard let session else { return }
        submittedGoAway = true
        let result = debugData.withUnsafeBufferPointer { debug in
            nghttp2_submit_goaway(
                session, UInt8(NGHTTP2_FLAG_NONE.rawValue), lastStreamID, code.rawValue, debug.baseAddress, debug.count)
        }
        guard result == 0 else { throw .http2("nghttp2_submit_goaway failed: \(Self.describe(result))") }
    }

    /// The highest stream id the client has opened so far.
    var lastClientStreamID: Int32 {
        guard let session else { return 0 }
        return nghttp2_session_get_last_proc_stream_id(session)
    }

    fileprivate func noteAutomaticReset(stream: Int32) {
        if submittedResets.remove(stream) == nil { automaticResets += 1 }
    }

    fileprivate func noteGoAwaySent() {
        if !submittedGoAway { automaticGoAways += 1 }
    }

    private static func describe(_ code: Int32) -> String {
        guard let message = nghttp2_strerror(code) else { return "error \(code)" }
        return String(cString: message)
    }
}

/// Builds an `nghttp2_nv` array over the bytes of `fields`, all kept in
/// one buffer for the duration of `body`.
private func withNameValuePairs(
    _ fields: [(String, String)], _ body: (UnsafeMutableBufferPointer<nghttp2_nv>) -> Void
) {
    var storage: [UInt8] = []
    var lengths: [(name: Int, value: Int)] = []
    storage.reserveCapacity(128)
    lengths.reserveCapacity(fields.count)
    for (name, value) in fields {
        let start = storage.count
        storage.append(contentsOf: name.utf8)
        let middle = storage.count
        storage.append(contentsOf: value.utf8)
        lengths.append((middle - start, storage.count - middle))
    }
    storage.withUnsafeMutableBufferPointer { buffer in
        guard let base = buffer.baseAddress else { return }
        var pairs: [nghttp2_nv] = []
        pairs.reserveCapacity(lengths.count)
        var offset = 0
        for (nameCount, valueCount) in lengths {
            pairs.append(
                nghttp2_nv(
                    name: base + offset, value: base + offset + nameCount, namelen: nameCount,
                    valuelen: valueCount, flags: UInt8(NGHTTP2_NV_FLAG_NONE.rawValue)))
            offset += nameCount + valueCount
        }
        pairs.withUnsafeMutableBufferPointer { body($0) }
    }
}

private func owner(_ userData: UnsafeMutableRawPointer?) -> NGHTTP2ServerSession? {
    guard let userData else { return nil }
    return Unmanaged<NGHTTP2ServerSession>.fromOpaque(userData).takeUnretainedValue()
}

private func isRequestHeaders(_ frame: UnsafePointer<nghttp2_frame>) -> Bool {
    frame.pointee.hd.type == UInt8(NGHTTP2_HEADERS.rawValue)
        && frame.pointee.headers.cat == NGHTTP2_HCAT_REQUEST
}

private let onBeginHeaders: nghttp2_on_begin_headers_callback = { _, frame, userData in
    guard let frame, let session = owner(userData) else { return 0 }
    if isRequestHeaders(frame) {
        session.events.append(.streamOpened(frame.pointee.hd.stream_id))
        session.headerBlock = (frame.pointee.hd.stream_id, HeaderBlock())
    } else {
        session.headerBlock = nil
    }
    return 0
}

private let onHeader: nghttp2_on_header_callback = { _, frame, name, nameLength, value, valueLength, _, userData in
    guard let frame, let session = owner(userData), session.headerBlock?.stream == frame.pointee.hd.stream_id else {
        return 0
    }
    session.headerBlock?.block.append(
        name: UnsafeBufferPointer(start: name, count: name == nil ? 0 : nameLength),
        value: UnsafeBufferPointer(start: value, count: value == nil ? 0 : valueLength))
    return 0
}

private let onDataChunk: nghttp2_on_data_chunk_recv_callback = { _, _, streamID, data, length, userData in
    guard let session = owner(userData), let data, length > 0 else { return 0 }
    // Copied: nghttp2 reuses its buffer once the callback returns.
    session.events.append(.data(stream: streamID, bytes: Array(UnsafeBufferPointer(start: data, count: length))))
    return 0
}

private let onFrameReceived: nghttp2_on_frame_recv_callback = { _, frame, userData in
    guard let frame, let session = owner(userData) else { return 0 }
    let type = frame.pointee.hd.type
    let endStream = frame.pointee.hd.flags & UInt8(NGHTTP2_FLAG_END_STREAM.rawValue) != 0
    if isRequestHeaders(frame), let (stream, block) = session.headerBlock, stream == frame.pointee.hd.stream_id {
        session.headerBlock = nil
        session.events.append(.headers(stream: stream, block))
    }
    if type == UInt8(NGHTTP2_HEADERS.rawValue) || type == UInt8(NGHTTP2_DATA.rawValue), endStream {
        session.events.append(.requestComplete(frame.pointee.hd.stream_id))
    } else if type == UInt8(NGHTTP2_SETTINGS.rawValue), frame.pointee.hd.flags & UInt8(NGHTTP2_FLAG_ACK.rawValue) != 0 {
        session.events.append(.settingsAcknowledged)
    }
    return 0
}

private let onFrameSent: nghttp2_on_frame_send_callback = { _, frame, userData in
    guard let frame, let session = owner(userData) else { return 0 }
    if frame.pointee.hd.type == UInt8(NGHTTP2_RST_STREAM.rawValue) {
        session.noteAutomaticReset(stream: frame.pointee.hd.stream_id)
    } else if frame.pointee.hd.type == UInt8(NGHTTP2_GOAWAY.rawValue) {
        session.noteGoAwaySent()
    }
    return 0
}

private let onStreamClose: nghttp2_on_stream_close_callback = { _, streamID, errorCode, userData in
    guard let session = owner(userData) else { return 0 }
    session.bodies[streamID] = nil
    session.events.append(.streamClosed(streamID, errorCode: errorCode))
    return 0
}

private let readBody: nghttp2_data_source_read_callback = { _, streamID, buffer, length, flags, _, userData in
    guard let session = owner(userData), let buffer, let flags else {
        return Int(NGHTTP2_ERR_CALLBACK_FAILURE.rawValue)
    }
    guard let pending = session.bodies[streamID] else {
        flags.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue
        return 0
    }
    let count = min(length, pending.bytes.count - pending.offset)
    pending.bytes.withUnsafeBufferPointer { bytes in
        if let base = bytes.baseAddress, count > 0 {
            buffer.update(from: base + pending.offset, count: count)
        }
    }
    let offset = pending.offset + count
    if offset >= pending.bytes.count {
        flags.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue
        session.bodies[streamID] = nil
    } else {
        session.bodies[streamID] = (pending.bytes, offset)
    }
    return count
}
