package writer

// The tasks whose ledger row holds their batches, remembered so their
// later results skip creating it.

// maxKnown bounds the tasks a writer remembers as created.
const maxKnown = 4096

func (w *Writer) isKnown(taskID string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, ok := w.known[taskID]
	return ok
}

func (w *Writer) remember(taskID string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.known[taskID]; ok {
		return
	}
	w.known[taskID] = struct{}{}
	w.knownOrder = append(w.knownOrder, taskID)
	if len(w.knownOrder) > maxKnown {
		delete(w.known, w.knownOrder[0])
		w.knownOrder = w.knownOrder[1:]
	}
}

func (w *Writer) forget(taskID string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.known, taskID)
}
