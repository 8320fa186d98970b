import LiveDispatchCore

/// Encodes spans as an OTLP `ExportTraceServiceRequest` in protobuf, the
/// body of an OTLP/HTTP `POST /v1/traces` with `Content-Type:
/// application/x-protobuf`.
///
/// Field numbers are those of opentelemetry-proto's
/// `opentelemetry/proto/collector/trace/v1/trace_service.proto`,
/// `trace/v1/trace.proto`, `common/v1/common.proto` and
/// `resource/v1/resource.proto`.
public enum OTLPTraceEncoding {
    /// The name and version of what made the spans (`InstrumentationScope`).
    public static let scopeName = "livedispatch"

    /// One request holding `spans` of one resource, described by
    /// `resource` (`service.name` and the like).
    public static func exportRequest(_ spans: [SpanRecord], resource: [SpanRecord.Attribute]) -> [UInt8] {
        var request = ProtobufWriter()
        // ExportTraceServiceRequest.resource_spans = 1
        request.message(1) { resourceSpans in
            // ResourceSpans.resource = 1 → Resource.attributes = 1
            resourceSpans.message(1) { writer in
                for attribute in resource { writer.message(1) { keyValue(&$0, attribute) } }
            }
            // ResourceSpans.scope_spans = 2
            resourceSpans.message(2) { scopeSpans in
                // ScopeSpans.scope = 1 → InstrumentationScope.name = 1
                scopeSpans.message(1) { $0.string(1, scopeName) }
                // ScopeSpans.spans = 2
                for span in spans { scopeSpans.message(2) { write(span, to: &$0) } }
            }
        }
        return request.bytes
    }

    /// The 16 bytes of a trace id, big-endian, as OTLP and W3C write it.
    static func traceID(_ context: TraceContext) -> [UInt8] {
        bigEndian(context.traceIDHigh) + bigEndian(context.traceIDLow)
    }

    static func bigEndian(_ value: UInt64) -> [UInt8] {
        (0..<8).map { UInt8(truncatingIfNeeded: value >> (56 - 8 * UInt64($0))) }
    }

    /// One `Span`.
    static func write(_ span: SpanRecord, to writer: inout ProtobufWriter) {
        writer.lengthDelimited(1, traceID(span.context))
        writer.lengthDelimited(2, bigEndian(span.context.spanID))
        writer.string(3, span.context.traceState)
        if let parent = span.parentSpanID { writer.lengthDelimited(4, bigEndian(parent)) }
        writer.string(5, span.name)
        writer.uint64(6, UInt64(span.kind.rawValue))
        writer.fixed64(7, span.startNanoseconds)
        writer.fixed64(8, span.endNanoseconds)
        for attribute in span.attributes { writer.message(9) { keyValue(&$0, attribute) } }
        for event in span.events {
            writer.message(11) { eventWriter in
                eventWriter.fixed64(1, event.nanosecondsSinceEpoch)
                eventWriter.string(2, event.name)
                for attribute in event.attributes { eventWriter.message(3) { keyValue(&$0, attribute) } }
            }
        }
        for link in span.links {
            writer.message(13) { linkWriter in
                linkWriter.lengthDelimited(1, traceID(link.context))
                linkWriter.lengthDelimited(2, bigEndian(link.context.spanID))
                linkWriter.string(3, link.context.traceState)
                for attribute in link.attributes { linkWriter.message(4) { keyValue(&$0, attribute) } }
                linkWriter.fixed32(6, flags(link.context))
            }
        }
        // Status: message = 2, code = 3 (0 unset, 1 ok, 2 error).
        switch span.status {
        case .unset: break
        case .ok: writer.message(15) { $0.uint64(3, 1) }
        case .error(let message):
            writer.message(15) { status in
                status.string(2, message)
                status.uint64(3, 2)
            }
        }
        writer.fixed32(16, flags(span.context))
    }

    /// `Span.flags` and `Link.flags`: the W3C trace flags in the low byte
    /// (whether the parent is remote is left unsaid).
    static func flags(_ context: TraceContext) -> UInt32 {
        UInt32(context.flags)
    }

    /// A `KeyValue`: key = 1, value = 2.
    static func keyValue(_ writer: inout ProtobufWriter, _ attribute: SpanRecord.Attribute) {
        writer.string(1, attribute.key)
        writer.message(2) { anyValue(&$0, attribute.value) }
    }

    /// An `AnyValue` oneof: string = 1, bool = 2, int = 3, double = 4,
    /// array = 5 (`ArrayValue.values` = 1). Each member is written even
    /// when zero, so the oneof says which it is.
    static func anyValue(_ writer: inout ProtobufWriter, _ value: SpanRecord.Value) {
        switch value {
        case .string(let text): writer.string(1, text, always: true)
        case .bool(let flag): writer.bool(2, flag, always: true)
        case .int(let number):
            writer.tag(3, .varint)
            writer.varint(UInt64(bitPattern: number))
        case .double(let number): writer.double(4, number, always: true)
        case .array(let values):
            writer.message(5) { array in
                for element in values { array.message(1) { anyValue(&$0, element) } }
            }
        }
    }
}
