package countersign

import (
	"strings"

	"github.com/google/uuid"
)

// newID returns a time-ordered random id (UUIDv7, hex).
func newID() string {
	u, err := uuid.NewV7()
	if err != nil {
		u = uuid.New()
	}
	return strings.ReplaceAll(u.String(), "-", "")
}
