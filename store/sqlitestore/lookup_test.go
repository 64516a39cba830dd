package sqlitestore

import (
	"database/sql"
	"strings"
	"testing"
)

// TestValueScanner pins the conversions the call's lookup relies on to read
// its row in parts, and that it refuses what it cannot convert rather than
// leave a zero value behind.
func TestValueScanner(t *testing.T) {
	t.Parallel()
	var (
		s    string
		n    int64
		ns   sql.NullString
		ni   sql.NullInt64
		bad  float64
		none sql.NullInt64
	)
	if err := (valueScanner{"a", int64(7), nil, int64(9), nil}).Scan(&s, &n, &ns, &ni, &none); err != nil {
		t.Fatalf("Scan: %v", err)
	}
	if s != "a" || n != 7 || ns.Valid || !ni.Valid || ni.Int64 != 9 || none.Valid {
		t.Errorf("scanned %q, %d, %+v, %+v, %+v", s, n, ns, ni, none)
	}
	if err := (valueScanner{[]byte("b")}).Scan(&s); err != nil || s != "b" {
		t.Errorf("text as bytes: %q, %v", s, err)
	}
	for _, c := range []struct {
		name string
		vals valueScanner
		dest []any
		want string
	}{
		{"NULL into a string", valueScanner{nil}, []any{&s}, "is not text"},
		{"an integer into a string", valueScanner{int64(1)}, []any{&s}, "is not text"},
		{"NULL into an integer", valueScanner{nil}, []any{&n}, "is not an integer"},
		{"text into an integer", valueScanner{"1"}, []any{&n}, "is not an integer"},
		{"text into a NullInt64", valueScanner{"x"}, []any{&ni}, "column 0"},
		{"an unknown destination", valueScanner{1.5}, []any{&bad}, "cannot scan into"},
		{"more destinations than columns", valueScanner{"a"}, []any{&s, &s}, "1 columns to scan into 2"},
	} {
		if err := c.vals.Scan(c.dest...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Scan = %v, want an error naming %q", c.name, err, c.want)
		}
	}
}
