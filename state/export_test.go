package state

import "github.com/sessiond/sessiond/session"

// Used only by tests: the daemon lists records through allParallel.

// forEach calls fn with every session, in id order, stopping at the first
// error. The records are read before fn is first called, so fn may Update
// or Create through the same Tx.
func (tx *Tx) forEach(fn func(rec *session.Record) error) error {
	recs, err := tx.all()
	if err != nil {
		return err
	}
	for _, r := range recs {
		if err := fn(r); err != nil {
			return err
		}
	}
	return nil
}

func (tx *Tx) all() ([]*session.Record, error) {
	var recs []*session.Record
	err := tx.sessions.ForEach(func(k, v []byte) error {
		r, err := decodeRecord(string(k), v)
		if err != nil {
			return err
		}
		recs = append(recs, r)
		return nil
	})
	return recs, err
}
