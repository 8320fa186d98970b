/// The header fields of one request as they came off the wire: names and
/// values back to back in one buffer, turned into strings only when read.
struct HeaderBlock: Sendable, Hashable {
    struct Bounds: Sendable, Hashable {
        var nameStart: Int
        var valueStart: Int
        var valueEnd: Int
    }

    private(set) var bytes: [UInt8] = []
    private(set) var bounds: [Bounds] = []

    init() {
        bytes.reserveCapacity(512)
        bounds.reserveCapacity(12)
    }

    init(_ fields: [HeaderField]) {
        self.init()
        for field in fields { append(name: field.name, value: field.value) }
    }

    mutating func append(name: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>) {
        let nameStart = bytes.count
        bytes.append(contentsOf: name)
        let valueStart = bytes.count
        bytes.append(contentsOf: value)
        bounds.append(Bounds(nameStart: nameStart, valueStart: valueStart, valueEnd: bytes.count))
    }

    mutating func append(name: String, value: String) {
        let nameStart = bytes.count
        bytes.append(contentsOf: name.utf8)
        let valueStart = bytes.count
        bytes.append(contentsOf: value.utf8)
        bounds.append(Bounds(nameStart: nameStart, valueStart: valueStart, valueEnd: bytes.count))
    }

    var count: Int { bounds.count }

    /// Whether field `index` is named `name` (lowercase, as HTTP/2 requires).
    func name(at index: Int, is name: StaticString) -> Bool {
        let field = bounds[index]
        guard field.valueStart - field.nameStart == name.utf8CodeUnitCount else { return false }
        var offset = 0
        while offset < name.utf8CodeUnitCount {
            if bytes[field.nameStart + offset] != name.utf8Start[offset] { return false }
            offset += 1
        }
        return true
    }

    func nameBytes(at index: Int) -> ArraySlice<UInt8> { bytes[bounds[index].nameStart..<bounds[index].valueStart] }

    func valueBytes(at index: Int) -> ArraySlice<UInt8> { bytes[bounds[index].valueStart..<bounds[index].valueEnd] }

    /// Whether fields `first` and `second` have the same name.
    func sameName(_ first: Int, _ second: Int) -> Bool { nameBytes(at: first).elementsEqual(nameBytes(at: second)) }

    func name(at index: Int) -> String {
        String(decoding: bytes[bounds[index].nameStart..<bounds[index].valueStart], as: UTF8.self)
    }

    func value(at index: Int) -> String {
        String(decoding: bytes[bounds[index].valueStart..<bounds[index].valueEnd], as: UTF8.self)
    }

    /// Every field as strings, in order.
    var fields: [HeaderField] {
        (0..<count).map { HeaderField(name: name(at: $0), value: value(at: $0)) }
    }
}
