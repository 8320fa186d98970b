import CRdKafka

/// Copies consumed librdkafka messages into Swift values.
enum RDKafkaMessage {
    /// Remembers topic names of topic handles, so a record does not build its topic string anew.
    struct TopicNames {
        private var lastHandle: OpaquePointer?
        private var lastName = ""
        private var names: [OpaquePointer: String] = [:]

        mutating func name(of handle: OpaquePointer) -> String {
            if handle == lastHandle { return lastName }
            let name: String
            if let cached = names[handle] {
                name = cached
            } else {
                name = String(cString: rd_kafka_topic_name(handle))
                names[handle] = name
            }
            lastHandle = handle
            lastName = name
            return name
        }
    }

    /// A Swift record copied out of a consumed message.
    static func record(
        from message: UnsafeMutablePointer<rd_kafka_message_t>, topicNames: inout TopicNames
    ) -> KafkaRecord {
        let raw = message.pointee
        let topic = raw.rkt.map { topicNames.name(of: $0) } ?? ""
        let key = raw.key.map { Array(UnsafeRawBufferPointer(start: $0, count: raw.key_len)) }
        let value = raw.payload.map { Array(UnsafeRawBufferPointer(start: $0, count: raw.len)) }
        var headers: [KafkaHeader] = []
        var headerList: OpaquePointer?
        if rd_kafka_message_headers(message, &headerList) == RD_KAFKA_RESP_ERR_NO_ERROR, let headerList {
            let count = rd_kafka_header_cnt(headerList)
            headers.reserveCapacity(count)
            for index in 0..<count {
                var name: UnsafePointer<CChar>?
                var value: UnsafeRawPointer?
                var size = 0
                guard rd_kafka_header_get_all(headerList, index, &name, &value, &size) == RD_KAFKA_RESP_ERR_NO_ERROR,
                    let name
                else { continue }
                headers.append(
                    KafkaHeader(
                        key: String(cString: name),
                        value: value.map { Array(UnsafeRawBufferPointer(start: $0, count: size)) }))
            }
        }
        var timestampType = RD_KAFKA_TIMESTAMP_NOT_AVAILABLE
        let timestamp = rd_kafka_message_timestamp(message, &timestampType)
        return KafkaRecord(
            topic: topic, partition: raw.partition, offset: raw.offset, key: key, value: value, headers: headers,
            timestampMilliseconds: timestamp >= 0 ? timestamp : nil)
    }

}
