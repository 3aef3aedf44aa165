package esm

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
)

// Checkpoints are stream mappings' positions — the last record done in
// each shard — kept in a file, so that a mapping that restarts resumes
// where it stopped, as Lambda's do, instead of losing what was written
// meanwhile. A nil *Checkpoints keeps nothing.
type Checkpoints struct {
	path string
	mu   sync.Mutex
	pos  map[string]string // stream ARN + " " + shard ID → sequence number
}

// LoadCheckpoints reads the checkpoints kept at path, none when it does not
// exist yet.
func LoadCheckpoints(path string) (*Checkpoints, error) {
	c := &Checkpoints{path: path, pos: map[string]string{}}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(data, &c.pos); err != nil {
		return nil, err
	}
	return c, nil
}

// Get returns the last sequence number done in a shard, "" when none.
func (c *Checkpoints) Get(stream, shard string) string {
	if c == nil {
		return ""
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pos[stream+" "+shard]
}

// Set records seq as the last done in a shard, and saves every checkpoint.
func (c *Checkpoints) Set(stream, shard, seq string) error {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pos[stream+" "+shard] = seq
	data, err := json.MarshalIndent(c.pos, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(c.path), 0o755); err != nil {
		return err
	}
	// Written aside, then renamed: a crash never leaves half a file.
	tmp := c.path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, c.path)
}
