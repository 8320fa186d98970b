extension String {
    /// Levenshtein distance to `other`, in characters: how many insertions,
    /// deletions and substitutions turn one into the other. Used to suggest
    /// the key or name a user meant ("did you mean …?").
    public func editDistance(to other: String) -> Int {
        let a = Array(self)
        let b = Array(other)
        if a.isEmpty || b.isEmpty { return Swift.max(a.count, b.count) }
        var previous = Array(0...b.count)
        for i in 1...a.count {
            var current = [i] + Array(repeating: 0, count: b.count)
            for j in 1...b.count {
                current[j] = Swift.min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
            }
            previous = current
        }
        return previous[b.count]
    }

    /// The name in `names` this one most likely misspells: the same but for
    /// case, else the nearest within `maxDistance` edits (the first of
    /// equals, in the order given); nil when none is that close.
    public func nearest(among names: [String], maxDistance: Int) -> String? {
        let lowered = lowercased()
        if let same = names.first(where: { $0.lowercased() == lowered }) { return same }
        var best: (name: String, distance: Int)?
        for name in names {
            let distance = name.editDistance(to: self)
            if distance <= maxDistance, distance < best?.distance ?? Int.max { best = (name, distance) }
        }
        return best?.name
    }
}
