import CNghttp2

/// A minimal HTTP/2 client on an `nghttp2_session`, driven by hand: the
/// test moves bytes between it and the handler under test.
final class TestHTTP2Client {
    struct Response: Sendable, Hashable {
        var status: Int?
        var headers: [String: String] = [:]
        var body: [UInt8] = []
        var isComplete = false
    }

    private var session: OpaquePointer?
    fileprivate var responses: [Int32: Response] = [:]
    fileprivate var bodies: [Int32: [UInt8]] = [:]
    /// Streams reset by the server, with the error code.
    fileprivate(set) var resets: [Int32: UInt32] = [:]
    /// The GOAWAY received: last stream id and error code.
    fileprivate(set) var goAway: (lastStreamID: Int32, errorCode: UInt32)?
    /// Streams closed, in order.
    fileprivate(set) var closed: [Int32] = []

    init() {
        var callbacks: OpaquePointer?
        nghttp2_session_callbacks_new(&callbacks)
        nghttp2_session_callbacks_set_on_header_callback(callbacks) { _, frame, name, nameLength, value, valueLength, _, userData in
            guard let frame, let client = clientFrom(userData), let name, let value else { return 0 }
            let key = String(decoding: UnsafeBufferPointer(start: name, count: nameLength), as: UTF8.self)
            let text = String(decoding: UnsafeBufferPointer(start: value, count: valueLength), as: UTF8.self)
            let stream = frame.pointee.hd.stream_id
            if key == ":status" { client.responses[stream, default: Response()].status = Int(text) }
            client.responses[stream, default: Response()].headers[key] = text
            return 0
        }
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks) { _, _, stream, data, length, userData in
            guard let client = clientFrom(userData), let data else { return 0 }
            client.responses[stream, default: Response()].body += Array(UnsafeBufferPointer(start: data, count: length))
            return 0
        }
        nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks) { _, frame, userData in
            guard let frame, let client = clientFrom(userData) else { return 0 }
            let type = frame.pointee.hd.type
            if type == UInt8(NGHTTP2_RST_STREAM.rawValue) {
                client.resets[frame.pointee.hd.stream_id] = frame.pointee.rst_stream.error_code
            } else if type == UInt8(NGHTTP2_GOAWAY.rawValue) {
                client.goAway = (frame.pointee.goaway.last_stream_id, frame.pointee.goaway.error_code)
            }
            if frame.pointee.hd.flags & UInt8(NGHTTP2_FLAG_END_STREAM.rawValue) != 0 {
                client.responses[frame.pointee.hd.stream_id, default: Response()].isComplete = true
            }
            return 0
        }
        nghttp2_session_callbacks_set_on_stream_close_callback(callbacks) { _, stream, _, userData in
            clientFrom(userData)?.closed.append(stream)
            return 0
        }
        var created: OpaquePointer?
        nghttp2_session_client_new(&created, callbacks, Unmanaged.passUnretained(self).toOpaque())
        nghttp2_session_callbacks_del(callbacks)
        session = created
        nghttp2_submit_settings(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), nil, 0)
    }

    deinit { nghttp2_session_del(session) }

    /// Queues a request; nghttp2 holds it back while the server's stream limit is reached.
    func submit(headers: [(String, String)], body: [UInt8]) -> Int32 {
        var storage: [UInt8] = []
        for (name, value) in headers { storage += Array(name.utf8) + Array(value.utf8) }
        var streamID: Int32 = -1
        bodies[0] = body  // placeholder key until the stream id is known
        storage.withUnsafeMutableBufferPointer { buffer in
            guard let base = buffer.baseAddress else { return }
            var pairs: [nghttp2_nv] = []
            var offset = 0
            for (name, value) in headers {
                let nameCount = name.utf8.count
                let valueCount = value.utf8.count
                pairs.append(nghttp2_nv(name: base + offset, value: base + offset + nameCount, namelen: nameCount,
                    valuelen: valueCount, flags: UInt8(NGHTTP2_NV_FLAG_NONE.rawValue)))
                offset += nameCount + valueCount
            }
            var provider = nghttp2_data_provider()
            provider.read_callback = { _, stream, buffer, length, flags, _, userData in
                guard let client = clientFrom(userData), let buffer, let flags else { return 0 }
                let pending = client.bodies[stream] ?? []
                let count = min(length, pending.count)
                pending.withUnsafeBufferPointer { bytes in
                    if let base = bytes.baseAddress, count > 0 { buffer.update(from: base, count: count) }
                }
                client.bodies[stream] = Array(pending.dropFirst(count))
                if client.bodies[stream]?.isEmpty ?? true { flags.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue }
                return count
            }
            if body.isEmpty {
                streamID = nghttp2_submit_request(session, nil, pairs, pairs.count, nil, nil)
            } else {
                streamID = nghttp2_submit_request(session, nil, pairs, pairs.count, &provider, nil)
            }
        }
        bodies[streamID] = bodies.removeValue(forKey: 0)
        return streamID
    }

    /// Everything the client has to send now.
    func output() -> [UInt8] {
        var bytes: [UInt8] = []
        while true {
            var data: UnsafePointer<UInt8>?
            let length = nghttp2_session_mem_send(session, &data)
            guard length > 0, let data else { return bytes }
            bytes += Array(UnsafeBufferPointer(start: data, count: length))
        }
    }

    func receive(_ bytes: [UInt8]) {
        bytes.withUnsafeBufferPointer { buffer in
            guard let base = buffer.baseAddress else { return }
            _ = nghttp2_session_mem_recv(session, base, buffer.count)
        }
    }

    func response(_ stream: Int32) -> Response? { responses[stream] }

    /// The server's `SETTINGS_MAX_CONCURRENT_STREAMS` as last received.
    var remoteMaxConcurrentStreams: UInt32 {
        nghttp2_session_get_remote_settings(session, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS)
    }
}

private func clientFrom(_ userData: UnsafeMutableRawPointer?) -> TestHTTP2Client? {
    guard let userData else { return nil }
    return Unmanaged<TestHTTP2Client>.fromOpaque(userData).takeUnretainedValue()
}
