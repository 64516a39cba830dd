package migrations

import (
	"strings"
	"testing"
	"testing/fstest"
)

func TestLoadAndPin(t *testing.T) {
	t.Parallel()
	fsys := fstest.MapFS{
		"m/0001_init.sql": {Data: []byte("CREATE TABLE a (x int);")},
		"m/0002_more.sql": {Data: []byte("ALTER TABLE a ADD y int;")},
	}
	files, err := Load(fsys, "m")
	if err != nil || len(files) != 2 || files[1].Version != 2 || files[1].Name != "0002_more.sql" {
		t.Fatalf("Load = %+v, %v", files, err)
	}
	pinned := map[string]string{"0001_init.sql": Sum(files[0]), "0002_more.sql": Sum(files[1])}
	if p := CheckPinned(files, pinned); len(p) != 0 {
		t.Fatalf("CheckPinned = %v", p)
	}
	files[0].SQL += " -- edited"
	delete(pinned, "0002_more.sql")
	pinned["0000_gone.sql"] = "x"
	p := strings.Join(CheckPinned(files, pinned), "\n")
	for _, want := range []string{"0001_init.sql was edited", "0002_more.sql has no pinned sum", "0000_gone.sql is missing"} {
		if !strings.Contains(p, want) {
			t.Errorf("problems lack %q:\n%s", want, p)
		}
	}
}

func TestLoadRefusesGapsAndBadNames(t *testing.T) {
	t.Parallel()
	for name, fsys := range map[string]fstest.MapFS{
		"gap":      {"m/0001_a.sql": {}, "m/0003_c.sql": {}},
		"no num":   {"m/init.sql": {}},
		"not sql":  {"m/0001_a.txt": {}},
		"from two": {"m/0002_b.sql": {}},
	} {
		if _, err := Load(fsys, "m"); err == nil {
			t.Errorf("%s: Load succeeded", name)
		}
	}
}
