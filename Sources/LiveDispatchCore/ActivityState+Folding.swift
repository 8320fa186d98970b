extension ActivityState {
    /// Folds what `command` says about the activity into this state: its
    /// content-state (replaced by a start or `replace_state`, merged
    /// otherwise), dates, relevance, attributes and app. The coalescer does
    /// this for every command it accepts; `rules diff` does it to show what
    /// the Lock Screen would have shown. Versions, offsets, remembered ids
    /// and `ended_at` are the caller's.
    public mutating func fold(_ command: ActivityCommand, now: UnixTime) {
        if command.event == .start || command.replaceState {
            contentState = command.contentState ?? .object([:])
        } else if let patch = command.contentState {
            contentState.applyMergePatch(patch)
        }
        if command.event == .end {
            // An end carries the stale date and relevance of its own
            // command only: those of earlier updates do not apply to the
            // final state (nor to its push sent again after a restart). Its
            // dismissal date is its own, else the one an update gave.
            staleDate = command.staleDate
            relevanceScore = command.relevanceScore
            if let dismissalDate = command.dismissalDate { self.dismissalDate = dismissalDate }
        } else {
            // Kept for the end: APNs reads a dismissal date only there.
            if let dismissalDate = command.dismissalDate { self.dismissalDate = dismissalDate }
            if let staleDate = command.staleDate {
                self.staleDate = staleDate
            } else if let carried = staleDate, carried <= now {
                // A stale date that has passed is not carried into a new
                // update: it would arrive already stale, expiring at once.
                staleDate = nil
            }
            if let relevanceScore = command.relevanceScore { self.relevanceScore = relevanceScore }
        }
        if let attributesType = command.attributesType { self.attributesType = attributesType }
        if let attributes = command.attributes { self.attributes = attributes }
        if app == nil { app = command.app }
    }
}
