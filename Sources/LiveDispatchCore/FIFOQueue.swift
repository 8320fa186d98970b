/// A first-in, first-out queue on one array: taking from the front moves a
/// head index, and the taken prefix is dropped once it is most of the array,
/// so each element is moved at most once on average.
struct FIFOQueue<Element: Sendable>: Sendable {
    private var elements: [Element] = []
    private var head = 0

    var isEmpty: Bool { head == elements.count }

    mutating func append(_ element: Element) { elements.append(element) }

    mutating func popFirst() -> Element? {
        guard head < elements.count else { return nil }
        let element = elements[head]
        head += 1
        if head == elements.count {
            elements.removeAll(keepingCapacity: true)
            head = 0
        } else if head > 1024 && head * 2 > elements.count {
            elements.removeFirst(head)
            head = 0
        }
        return element
    }
}
