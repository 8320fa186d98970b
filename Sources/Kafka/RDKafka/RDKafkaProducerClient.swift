import CRdKafka
#if canImport(Glibc)
import Glibc
#endif
import Logging
import Synchronization

/// The waiting side of one produced record, resumed by its delivery report.
final class RDKafkaDelivery: Sendable {
    typealias Outcome = Result<KafkaDeliveryReport, KafkaError>

    private enum Waiter {
        case continuation(CheckedContinuation<Outcome, Never>)
        case callback(@Sendable (Outcome) -> Void)
    }

    private enum State {
        case waiting(Waiter?)
        case resolved(Outcome)
    }

    private let state = Mutex(State.waiting(nil))
    /// The record's topic, as given: its delivery report names it without
    /// reading librdkafka's name back into a new string per record.
    let topic: String

    init(topic: String) { self.topic = topic }

    /// Called once, from the delivery report (or when librdkafka refused the record).
    func resolve(_ result: Outcome) {
        let waiter: Waiter? = state.withLock { state in
            guard case .waiting(let waiter) = state else { return nil }
            state = .resolved(result)
            return waiter
        }
        switch waiter {
        case .continuation(let continuation): continuation.resume(returning: result)
        case .callback(let body): body(result)
        case nil: break
        }
    }

    /// The delivery's result, once known. One waiter at a time.
    func wait() async -> Outcome {
        await withCheckedContinuation { continuation in
            if let ready = register(.continuation(continuation)) { continuation.resume(returning: ready) }
        }
    }

    /// Calls `body` once with the result: at once when it is known, else on
    /// librdkafka's delivery thread. No task waits.
    func whenResolved(_ body: @escaping @Sendable (Outcome) -> Void) {
        if let ready = register(.callback(body)) { body(ready) }
    }

    private func register(_ waiter: Waiter) -> Outcome? {
        state.withLock { state in
            switch state {
            case .resolved(let result):
                return result
            case .waiting:
                state = .waiting(waiter)
                return nil
            }
        }
    }
}

/// Counts resolved delivery reports so a sender that met a full queue can
/// wait until some record left it.
final class RDKafkaDeliveryNotifier: Sendable {
    private struct State {
        var generation: UInt64 = 0
        var waiters: [CheckedContinuation<Void, Never>] = []
    }

    private let state = Mutex(State())

    var generation: UInt64 { state.withLock { $0.generation } }

    func resolved() {
        let waiters = state.withLock { state in
            state.generation &+= 1
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Returns once a delivery report newer than `generation` was resolved.
    func wait(after generation: UInt64) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let ready = state.withLock { state in
                if state.generation != generation { return true }
                state.waiters.append(continuation)
                return false
            }
            if ready { continuation.resume() }
        }
    }
}

/// A librdkafka producer whose delivery reports are resolved on librdkafka's
/// own background thread (`rd_kafka_conf_set_background_event_cb`), so no
/// Swift task ever polls.
final class RDKafkaProducerClient: Sendable {
    let handle: RDKafkaHandle
    private let notifier: RDKafkaDeliveryNotifier
    private let topics: RDKafkaTopicHandles

    /// - Parameter topicProperties: topic-level properties of some topics
    ///   (`compression.type`): their handles are made here, before any
    ///   record names the topic, and kept for the producer's life, so
    ///   librdkafka produces every record of the topic with them.
    init(properties: [String: String], topicProperties: [String: [String: String]] = [:], logger: Logger) throws(KafkaError) {
        let notifier = RDKafkaDeliveryNotifier()
        let context = RDKafkaClientContext(logger: logger, deliveriesResolved: { notifier.resolved() })
        self.notifier = notifier
        self.handle = try RDKafkaHandle(kind: .producer, properties: properties, context: context) { configuration in
            rd_kafka_conf_set_events(configuration, Int32(RD_KAFKA_EVENT_DR | RD_KAFKA_EVENT_ERROR))
            rd_kafka_conf_set_background_event_cb(configuration) { _, event, opaque in
                guard let event, let opaque else { return }
                let context = RDKafkaClientContext.from(opaque)
                RDKafkaProducerClient.handle(event: event, context: context)
                rd_kafka_event_destroy(event)
            }
        }
        // Delivery reports and errors land on the main queue; forward it to the
        // background queue, whose thread calls the callback above.
        let main = rd_kafka_queue_get_main(handle.pointer)
        let background = rd_kafka_queue_get_background(handle.pointer)
        rd_kafka_queue_forward(main, background)
        rd_kafka_queue_destroy(main)
        rd_kafka_queue_destroy(background)
        self.topics = try RDKafkaTopicHandles(handle, topicProperties)
    }

    private static func handle(event: OpaquePointer, context: RDKafkaClientContext) {
        switch Int32(rd_kafka_event_type(event)) {
        case Int32(RD_KAFKA_EVENT_DR):
            while let message = rd_kafka_event_message_next(event) {
                let record = message.pointee
                guard let opaque = record._private else { continue }
                let delivery = Unmanaged<RDKafkaDelivery>.fromOpaque(opaque).takeRetainedValue()
                if record.err == RD_KAFKA_RESP_ERR_NO_ERROR {
                    delivery.resolve(
                        .success(
                            KafkaDeliveryReport(topic: delivery.topic, partition: record.partition, offset: record.offset)))
                } else {
                    delivery.resolve(
                        .failure(
                            KafkaError(
                                code: .delivery,
                                message: "the record was not delivered; librdkafka gave up after its retries",
                                error: record.err)))
                }
            }
            context.deliveriesResolved?()
        case Int32(RD_KAFKA_EVENT_ERROR):
            let error = rd_kafka_event_error(event)
            let text = String(cString: rd_kafka_event_error_string(event))
            let fatal = rd_kafka_event_error_is_fatal(event) != 0
            context.logger.log(
                level: fatal ? .error : .warning, "Kafka producer error",
                metadata: [
                    "kafka.error": "\(String(cString: rd_kafka_err2name(error)))", "kafka.message": "\(text)",
                    "kafka.fatal": "\(fatal)",
                ])
        default:
            break
        }
    }

    /// Hands one record to librdkafka and waits for its delivery report.
    func send(
        topic: String, key: [UInt8]?, value: [UInt8]?, partition: Int32?, headers: [KafkaHeader]
    ) async throws(KafkaError) -> KafkaDeliveryReport {
        while true {
            let generation = notifier.generation
            do {
                let delivery = try enqueueNow(topic: topic, key: key, value: value, partition: partition, headers: headers)
                return try await delivery.wait().get()
            } catch where error.librdkafkaCode == RD_KAFKA_RESP_ERR__QUEUE_FULL.rawValue {
                await notifier.wait(after: generation)
            }
        }
    }

    /// Hands the record to librdkafka now, in the caller's order; the
    /// returned delivery resolves with its report. Throws at once when
    /// librdkafka refuses it (a full queue among other reasons).
    func enqueueNow(
        topic: String, key: [UInt8]?, value: [UInt8]?, partition: Int32?, headers: [KafkaHeader]
    ) throws(KafkaError) -> RDKafkaDelivery {
        let delivery = RDKafkaDelivery(topic: topic)
        let retained = Unmanaged.passRetained(delivery)
        if let error = enqueue(topic: topic, key: key, value: value, partition: partition, headers: headers, opaque: retained.toOpaque()) {
            retained.release()
            throw error
        }
        return delivery
    }

    /// Calls `rd_kafka_produceva`; returns the error when librdkafka refused the record.
    private func enqueue(
        topic: String, key: [UInt8]?, value: [UInt8]?, partition: Int32?, headers: [KafkaHeader],
        opaque: UnsafeMutableRawPointer
    ) -> KafkaError? {
        // A zero-length but present key or value must not be sent as null.
        let emptyBytes: [UInt8] = [0]
        return topic.withCString { topicName in
            withBytes(key, empty: emptyBytes) { keyPointer, keyLength in
                withBytes(value, empty: emptyBytes) { valuePointer, valueLength in
                    withHeaderNames(headers) { headerNames in
                        var arguments: [rd_kafka_vu_t] = []
                        var argument = rd_kafka_vu_t()
                        argument.vtype = RD_KAFKA_VTYPE_TOPIC
                        argument.u.cstr = topicName
                        arguments.append(argument)
                        argument = rd_kafka_vu_t()
                        argument.vtype = RD_KAFKA_VTYPE_PARTITION
                        argument.u.i32 = partition ?? RD_KAFKA_PARTITION_UA
                        arguments.append(argument)
                        if let keyPointer {
                            argument = rd_kafka_vu_t()
                            argument.vtype = RD_KAFKA_VTYPE_KEY
                            argument.u.mem.ptr = UnsafeMutableRawPointer(mutating: keyPointer)
                            argument.u.mem.size = keyLength
                            arguments.append(argument)
                        }
                        argument = rd_kafka_vu_t()
                        argument.vtype = RD_KAFKA_VTYPE_VALUE
                        argument.u.mem.ptr = valuePointer.map { UnsafeMutableRawPointer(mutating: $0) }
                        argument.u.mem.size = valueLength
                        arguments.append(argument)
                        argument = rd_kafka_vu_t()
                        argument.vtype = RD_KAFKA_VTYPE_MSGFLAGS
                        argument.u.i32 = RD_KAFKA_MSG_F_COPY
                        arguments.append(argument)
                        argument = rd_kafka_vu_t()
                        argument.vtype = RD_KAFKA_VTYPE_OPAQUE
                        argument.u.ptr = opaque
                        arguments.append(argument)
                        return withHeaderValues(headers) { headerValues in
                            for (index, name) in headerNames.enumerated() {
                                argument = rd_kafka_vu_t()
                                argument.vtype = RD_KAFKA_VTYPE_HEADER
                                argument.u.header.name = name
                                argument.u.header.val = headerValues[index].pointer
                                argument.u.header.size = headerValues[index].length
                                arguments.append(argument)
                            }
                            let count = arguments.count
                            let error = arguments.withUnsafeBufferPointer { buffer in
                                rd_kafka_produceva(handle.pointer, buffer.baseAddress, count)
                            }
                            guard let error else { return nil }
                            return KafkaError(
                                code: .produce,
                                message: "librdkafka refused the record for topic '\(topic)'",
                                consuming: error)
                        }
                    }
                }
            }
        }
    }

    /// Fetches the metadata of `topics` (blocking, at most
    /// `timeoutMilliseconds` each) so the first record to each is sent at
    /// once instead of waiting in librdkafka for a lookup of its leader.
    func prepare(topics: [String], timeoutMilliseconds: Int32) -> KafkaError? {
        for topic in topics {
            guard let topicHandle = rd_kafka_topic_new(handle.pointer, topic, nil) else { continue }
            defer { rd_kafka_topic_destroy(topicHandle) }
            var metadata: UnsafePointer<rd_kafka_metadata>?
            let error = rd_kafka_metadata(handle.pointer, 0, topicHandle, &metadata, timeoutMilliseconds)
            if let metadata { rd_kafka_metadata_destroy(metadata) }
            guard error == RD_KAFKA_RESP_ERR_NO_ERROR else {
                return KafkaError(code: .metadata, message: "the metadata of \(topic) could not be read", error: error)
            }
        }
        return nil
    }

    /// Waits (blocking) until every queued record was delivered or `timeoutMilliseconds` passed.
    func flush(timeoutMilliseconds: Int32) -> KafkaError? {
        let error = rd_kafka_flush(handle.pointer, timeoutMilliseconds)
        guard error != RD_KAFKA_RESP_ERR_NO_ERROR else { return nil }
        return KafkaError(
            code: .delivery,
            message: "records were still waiting for delivery when the flush timed out (\(outstandingRecords) left)",
            error: error)
    }

    /// Records queued or in flight.
    var outstandingRecords: Int { Int(rd_kafka_outq_len(handle.pointer)) }
}

/// Calls `body` with a pointer and length for `bytes`: nil for nil, a valid
/// pointer with length 0 for an empty array.
private func withBytes<T>(
    _ bytes: [UInt8]?, empty: [UInt8], _ body: (UnsafeRawPointer?, Int) -> T
) -> T {
    guard let bytes else { return body(nil, 0) }
    if bytes.isEmpty {
        return empty.withUnsafeBytes { body($0.baseAddress, 0) }
    }
    return bytes.withUnsafeBytes { body($0.baseAddress, bytes.count) }
}

/// Keeps C strings for header names alive for the duration of `body`.
private func withHeaderNames<T>(_ headers: [KafkaHeader], _ body: ([UnsafePointer<CChar>]) -> T) -> T {
    let names = headers.map { strdup($0.key) }
    defer { names.forEach { free($0) } }
    return body(names.compactMap { $0.map { UnsafePointer($0) } })
}

/// Copies header values into memory that lives for the duration of `body`.
private func withHeaderValues<T>(
    _ headers: [KafkaHeader], _ body: ([(pointer: UnsafeRawPointer?, length: Int)]) -> T
) -> T {
    var storage: [UnsafeMutableRawPointer] = []
    defer { storage.forEach { $0.deallocate() } }
    let values: [(pointer: UnsafeRawPointer?, length: Int)] = headers.map { header in
        guard let value = header.value else { return (nil, 0) }
        let memory = UnsafeMutableRawPointer.allocate(byteCount: max(1, value.count), alignment: 1)
        storage.append(memory)
        value.withUnsafeBytes { bytes in
            if let base = bytes.baseAddress { memory.copyMemory(from: base, byteCount: value.count) }
        }
        return (UnsafeRawPointer(memory), value.count)
    }
    return body(values)
}

/// Topic handles made with settings of their own, destroyed with their
/// owner (before the client's handle).
final class RDKafkaTopicHandles: @unchecked Sendable {
    private let pointers: [OpaquePointer]

    init(_ handle: RDKafkaHandle, _ topicProperties: [String: [String: String]]) throws(KafkaError) {
        var pointers: [OpaquePointer] = []
        for (topic, properties) in topicProperties.sorted(by: { $0.key < $1.key }) {
            guard let configuration = rd_kafka_topic_conf_new() else {
                pointers.forEach { rd_kafka_topic_destroy($0) }
                throw KafkaError(code: .clientCreation, message: "librdkafka could not allocate a topic configuration for \(topic)")
            }
            for (name, value) in properties.sorted(by: { $0.key < $1.key }) {
                var errorText = [CChar](repeating: 0, count: 512)
                if rd_kafka_topic_conf_set(configuration, name, value, &errorText, errorText.count) != RD_KAFKA_CONF_OK {
                    rd_kafka_topic_conf_destroy(configuration)
                    pointers.forEach { rd_kafka_topic_destroy($0) }
                    throw KafkaError(
                        code: .configuration, message: "librdkafka rejected the property '\(name)' of topic \(topic); fix or remove it",
                        librdkafkaMessage: RDKafkaHandle.string(errorText))
                }
            }
            // Takes the configuration; fails only for an invalid name.
            guard let pointer = rd_kafka_topic_new(handle.pointer, topic, configuration) else {
                pointers.forEach { rd_kafka_topic_destroy($0) }
                throw KafkaError(code: .configuration, message: "librdkafka refused the topic name \(topic.debugDescription)")
            }
            pointers.append(pointer)
        }
        self.pointers = pointers
    }

    deinit {
        pointers.forEach { rd_kafka_topic_destroy($0) }
    }
}
