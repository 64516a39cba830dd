package store

import "testing"

// TestPageLimit: the limit a list read of "1..MaxPageSize; 0 means
// MaxPageSize" uses, at its edges.
func TestPageLimit(t *testing.T) {
	for _, tt := range []struct{ asked, want int }{
		{0, MaxPageSize}, {-1, MaxPageSize}, {1, 1}, {MaxPageSize - 1, MaxPageSize - 1},
		{MaxPageSize, MaxPageSize}, {MaxPageSize + 1, MaxPageSize}, {1 << 40, MaxPageSize},
	} {
		if got := PageLimit(tt.asked); got != tt.want {
			t.Errorf("PageLimit(%d) = %d, want %d", tt.asked, got, tt.want)
		}
	}
}
