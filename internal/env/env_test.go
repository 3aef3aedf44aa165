package env

import (
	"strings"
	"testing"
	"time"
)

func vars(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestReaders(t *testing.T) {
	get := vars(map[string]string{"ON": "true", "N": "7", "D": "3s", "BAD": "soon", "ZERO": "0s"})
	if v := String(get, "N"); v != "7" {
		t.Errorf("String = %q", v)
	}
	if b, err := Bool(get, "ON", false); !b || err != nil {
		t.Errorf("Bool = %v, %v", b, err)
	}
	if b, err := Bool(get, "UNSET", true); !b || err != nil {
		t.Errorf("Bool of an unset variable = %v, %v; want its default", b, err)
	}
	if n, err := Int(get, "N", 1, 1, 10); n != 7 || err != nil {
		t.Errorf("Int = %v, %v", n, err)
	}
	if n, err := Int(get, "UNSET", 2, 1, 10); n != 2 || err != nil {
		t.Errorf("Int of an unset variable = %v, %v; want its default", n, err)
	}
	if d, err := Duration(get, "D", time.Second, time.Second, time.Minute); d != 3*time.Second || err != nil {
		t.Errorf("Duration = %v, %v", d, err)
	}
	if d, err := Duration(get, "ZERO", time.Second, 0, 0); d != 0 || err != nil {
		t.Errorf("Duration of 0s, unbounded = %v, %v", d, err)
	}
	for name, read := range map[string]func() error{
		"BAD":  func() error { _, err := Bool(get, "BAD", false); return err },
		"D":    func() error { _, err := Int(get, "D", 1, 1, 10); return err },
		"N":    func() error { _, err := Int(get, "N", 1, 1, 5); return err },
		"ZERO": func() error { _, err := Duration(get, "ZERO", time.Second, time.Second, time.Minute); return err },
		"BAD ": func() error { _, err := Duration(get, "BAD", time.Second, 0, 0); return err },
	} {
		if err := read(); err == nil || !strings.HasPrefix(err.Error(), strings.TrimSpace(name)+"=") {
			t.Errorf("%s: err = %v, want one naming the variable", name, err)
		}
	}
}
