package sqlitestore

import (
	"errors"

	sqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/countersign/countersign/store"
)

// unreachable reports whether err means that the database file cannot be
// reached: it cannot be opened (its directory is gone or unreadable, the
// process is out of file descriptors) or the disk under it fails I/O (a
// volume detached, a network file system gone). Everything else is a
// database that answered: SQLITE_BUSY past the busy timeout is a lock
// another connection holds (the file is there and working, and the error
// says who to look for), SQLITE_FULL a full disk, SQLITE_CORRUPT and
// SQLITE_NOTADB a file that is not what it should be — none of which goes
// away by waiting a few seconds, and none is "try again later".
func unreachable(err error) bool {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return false
	}
	switch se.Code() & 0xff { // the primary code of an extended one
	case sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_IOERR:
		return true
	}
	return false
}

// classify marks the errors that mean the database cannot be reached as
// store.ErrUnavailable; others pass unchanged.
func classify(err error) error {
	if unreachable(err) {
		return store.Unavailable(err)
	}
	return err
}
