import CRdKafka

/// Copies consumed librdkafka messages into Swift values.
enum RDKafkaMessage {
    /// A Swift record copied out of a consumed message; `topicNames` caches topic handle names.
    static func record(
        from message: UnsafeMutablePointer<rd_kafka_message_t>, topicNames: inout [OpaquePointer: String]
    ) -> KafkaRecord {
        let raw = message.pointee
        var topic = ""
        if let rkt = raw.rkt {
            if let cached = topicNames[rkt] {
                topic = cached
            } else {
                topic = String(cString: rd_kafka_topic_name(rkt))
                topicNames[rkt] = topic
            }
        }
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
