import LiveDispatchCore
import Testing

@testable import LiveDispatchTracing

@Suite struct OTLPTraceEncodingTests {
    @Test func primitivesHaveTheirWireBytes() {
        var writer = ProtobufWriter()
        writer.varint(300)
        #expect(writer.bytes == [0xAC, 0x02])

        writer = ProtobufWriter()
        writer.int64(3, -1)
        #expect(writer.bytes == [0x18] + [UInt8](repeating: 0xFF, count: 9) + [0x01])

        writer = ProtobufWriter()
        writer.string(5, "ab")
        writer.fixed64(7, 1)
        writer.fixed32(16, 2)
        writer.double(4, 1.0, always: true)
        #expect(writer.bytes == [0x2A, 0x02, 0x61, 0x62, 0x39, 1, 0, 0, 0, 0, 0, 0, 0, 0x85, 0x01, 2, 0, 0, 0, 0x21, 0, 0, 0, 0, 0, 0, 0xF0, 0x3F])

        // proto3 leaves out zero values, except a oneof member that must say which it is.
        writer = ProtobufWriter()
        writer.uint64(1, 0)
        writer.string(2, "")
        writer.bool(3, false)
        #expect(writer.bytes.isEmpty)
        writer.bool(2, false, always: true)
        #expect(writer.bytes == [0x10, 0x00])
    }

    @Test func aSpanHasTheBytesOfItsFields() throws {
        let context = try #require(TraceContext(traceIDHigh: 1, traceIDLow: 2, spanID: 3, flags: 1))
        let span = SpanRecord(
            context: context, parentSpanID: 4, name: "n", kind: .server, startNanoseconds: 5, endNanoseconds: 6,
            attributes: [.init("k", .int(7))], status: .ok)
        var writer = ProtobufWriter()
        OTLPTraceEncoding.write(span, to: &writer)
        let zeros7 = [UInt8](repeating: 0, count: 7)
        var expected: [UInt8] = [0x0A, 0x10] + zeros7 + [1] + zeros7 + [2]    // trace_id = 1
        expected += [0x12, 0x08] + zeros7 + [3]                               // span_id = 2
        expected += [0x22, 0x08] + zeros7 + [4]                               // parent_span_id = 4
        expected += [0x2A, 0x01, 0x6E]                                        // name = 5
        expected += [0x30, 0x02]                                              // kind = 6 (server)
        expected += [0x39, 5] + zeros7                                        // start_time_unix_nano = 7
        expected += [0x41, 6] + zeros7                                        // end_time_unix_nano = 8
        expected += [0x4A, 0x07, 0x0A, 0x01, 0x6B, 0x12, 0x02, 0x18, 0x07]   // attributes = 9: {k: int 7}
        expected += [0x7A, 0x02, 0x18, 0x01]                                  // status = 15: code ok
        expected += [0x85, 0x01, 1, 0, 0, 0]                                  // flags = 16: sampled
        #expect(writer.bytes == expected)
    }

    @Test func aRequestNestsResourceScopeAndSpans() throws {
        let context = try #require(TraceContext(traceIDHigh: 1, traceIDLow: 2, spanID: 3, flags: 0))
        let span = SpanRecord(context: context, parentSpanID: nil, name: "", kind: .internal, startNanoseconds: 0, endNanoseconds: 0)
        let bytes = OTLPTraceEncoding.exportRequest([span], resource: [.init("s", .string("x"))])
        var spanBytes = ProtobufWriter()
        OTLPTraceEncoding.write(span, to: &spanBytes)
        let keyValue: [UInt8] = [0x0A, 0x01, 0x73, 0x12, 0x03, 0x0A, 0x01, 0x78]
        let resource: [UInt8] = [0x0A, UInt8(keyValue.count)] + keyValue
        let scope: [UInt8] = [0x0A, 0x0E, 0x0A, 0x0C] + Array("livedispatch".utf8)
        let scopeSpans = scope + [0x12, UInt8(spanBytes.bytes.count)] + spanBytes.bytes
        let resourceSpans: [UInt8] = [0x0A, UInt8(resource.count)] + resource + [0x12, UInt8(scopeSpans.count)] + scopeSpans
        #expect(bytes == [0x0A, UInt8(resourceSpans.count)] + resourceSpans)
    }

    @Test func negativeNumbersArraysAndErrorsAreEncoded() throws {
        var writer = ProtobufWriter()
        OTLPTraceEncoding.anyValue(&writer, .array([.int(-2), .bool(true), .string("")]))
        let minusTwo: [UInt8] = [0x18] + [0xFE] + [UInt8](repeating: 0xFF, count: 8) + [0x01]
        let elements: [UInt8] = [0x0A, UInt8(minusTwo.count)] + minusTwo + [0x0A, 0x02, 0x10, 0x01] + [0x0A, 0x02, 0x0A, 0x00]
        #expect(writer.bytes == [0x2A, UInt8(elements.count)] + elements)

        let context = try #require(TraceContext(traceIDHigh: 1, traceIDLow: 2, spanID: 3, flags: 0))
        var failed = ProtobufWriter()
        OTLPTraceEncoding.write(
            SpanRecord(context: context, parentSpanID: nil, name: "", kind: .client, startNanoseconds: 0, endNanoseconds: 0, status: .error(message: "x")),
            to: &failed)
        #expect(failed.bytes.suffix(7) == [0x7A, 0x05, 0x12, 0x01, 0x78, 0x18, 0x02])
    }
}
