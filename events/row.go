package events

import (
	"github.com/invalidator-go/invalidator/internal/jsonscan"
)

// typeUnavailable is the type of a column whose value its source did not send:
// Debezium's placeholder for an unchanged TOASTed PostgreSQL column, when
// the row before the change does not carry it either.
const typeUnavailable AttributeType = "unavailable"

// unavailable is Debezium's placeholder (unavailable.value.placeholder).
const unavailable = "__debezium_unavailable_value"

// decodeRow decodes a database row as JSON — an object of columns, as DMS
// and Debezium write one — at data[i] into an image: a string column
// becomes S, a number N (its text), true and false BOOL, null NULL, an
// object M and an array L, nested as far as DynamoDB's images may be. It
// returns the index after it; a row that is null is no image (nil).
func decodeRow(name string, data []byte, i int) (Image, int, error) {
	if i < len(data) && data[i] == 'n' {
		kind, end, err := jsonscan.ValueAt(data, i)
		if err == nil && kind != jsonscan.Null {
			err = invalid(name + " must be an object or null")
		}
		return nil, end, err
	}
	return decodeColumns(name, data, i, 0)
}

func decodeColumns(name string, data []byte, i, depth int) (Image, int, error) {
	if !startsWith(data, i, '{') {
		return nil, i, notA(data, i, name+" must be an object")
	}
	if depth > maxNesting {
		return nil, i, invalid(name + ": values nested deeper than 32 levels")
	}
	row := Image{}
	end, err := jsonscan.WalkAt(data, i, func(key []byte, i int) (int, error) {
		v, end, err := decodeColumn(name, data, i, depth)
		if err == nil {
			row[string(key)] = v
		}
		return end, err
	})
	return row, end, err
}

func decodeColumn(name string, data []byte, i, depth int) (AttributeValue, int, error) {
	switch {
	case startsWith(data, i, '{'):
		m, end, err := decodeColumns(name, data, i, depth+1)
		return AttributeValue{Type: TypeMap, M: m}, end, err
	case startsWith(data, i, '['):
		if depth >= maxNesting {
			return AttributeValue{}, i, invalid(name + ": values nested deeper than 32 levels")
		}
		var list []AttributeValue
		end, err := jsonscan.ElementsAt(data, i, func(i int) (int, error) {
			v, end, err := decodeColumn(name, data, i, depth+1)
			list = append(list, v)
			return end, err
		})
		return AttributeValue{Type: TypeList, L: list}, end, err
	}
	kind, end, err := jsonscan.ValueAt(data, i)
	if err != nil {
		return AttributeValue{}, end, err
	}
	switch kind {
	case jsonscan.String:
		text, err := jsonscan.Text(data[i:end])
		if text == unavailable {
			return AttributeValue{Type: typeUnavailable}, end, err
		}
		return AttributeValue{Type: TypeString, S: text}, end, err
	case jsonscan.Number:
		return AttributeValue{Type: TypeNumber, S: string(data[i:end])}, end, nil
	case jsonscan.True, jsonscan.False:
		return AttributeValue{Type: TypeBoolean, BOOL: kind == jsonscan.True}, end, nil
	default:
		return AttributeValue{Type: TypeNull}, end, nil
	}
}

// rowChange is the change of a database's row: its table, what was done,
// and the row after and before, as its reader wrote them. Unchanged
// columns the row after lacks (typeUnavailable) are taken from the row
// before when it has them.
func rowChange(source Source, table string, op Op, after, before Image) Change {
	for col, v := range after {
		if old, ok := before[col]; ok && v.Type == typeUnavailable && op == OpUpdate {
			after[col] = old
		}
	}
	now := after
	if now == nil {
		now = before
	}
	return Change{Entity: table, Table: table, Op: op, Source: source, ItemKey: now, NewImage: after, OldImage: before}
}
