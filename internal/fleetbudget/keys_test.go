package fleetbudget

import "testing"

func TestSlotIsTheClustersKeySlot(t *testing.T) {
	for key, want := range map[string]uint16{
		"123456789":                     0x31c3, // CRC16/XMODEM's check value
		"foo":                           12182,  // CLUSTER KEYSLOT's, from the cluster specification's examples
		"{user1000}.following":          slot("user1000"),
		"invalidator:ecpu-budget:25000": 16149,
	} {
		if got := slot(key); got != want {
			t.Errorf("slot(%q) = %d, want %d", key, got, want)
		}
	}
}

func TestTheTwoKeysAreHalfTheSlotsApart(t *testing.T) {
	for _, rate := range []float64{1250, 5000, 25000, 1e6} {
		k := Keys(rate)
		d := (int(slot(k[1])) - int(slot(k[0])) + slots) % slots
		if d = min(d, slots-d); d < slots/2-slots/16 {
			t.Errorf("Keys(%g) = %q, slots %d and %d: %d apart, want about %d", rate, k, slot(k[0]), slot(k[1]), d, slots/2)
		}
		if k[0] != Key(rate) || k[1][:len(Pattern)-1] != Pattern[:len(Pattern)-1] {
			t.Errorf("Keys(%g) = %q: want Key's first, both under %s", rate, k, Pattern)
		}
	}
}
