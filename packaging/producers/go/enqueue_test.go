// Testing placeOrder in memory with plain SQL (docs/producers-languages.md,
// "Testing in memory"): a fresh database per test, the outbox schema copied
// from a file that `outboxctl --db FILE init` made, the rows read back.
//
//	OUTBOX_SCHEMA_DB=schema.db GO111MODULE=off GOPATH=/usr/share/gocode go test
package main

import (
	"context"
	"database/sql"
	"os"
	"testing"
)

// memoryOutbox opens a database that lives in this process's memory, shared
// by every connection of db (SQLite's memdb VFS), with the outbox schema.
func memoryOutbox(t *testing.T) *sql.DB {
	template := os.Getenv("OUTBOX_SCHEMA_DB")
	if template == "" {
		t.Fatal("OUTBOX_SCHEMA_DB: name a file made by `outboxctl --db FILE init`")
	}
	db, err := sql.Open("sqlite3", "file:/"+t.Name()+"?vfs=memdb&_busy_timeout=5000&_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	// The database lives while one connection is open: hold one.
	keep, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { keep.Close(); db.Close() })
	copySchema(t, keep, template)
	if _, err := db.Exec("CREATE TABLE orders(id INTEGER PRIMARY KEY, item TEXT NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	return db
}

// copySchema copies tables with their rows first, then indexes, views and
// triggers, on one connection (ATTACH is per connection).
func copySchema(t *testing.T, conn *sql.Conn, template string) {
	ctx := context.Background()
	exec := func(query string, args ...any) {
		if _, err := conn.ExecContext(ctx, query, args...); err != nil {
			t.Fatalf("%s: %v", query, err)
		}
	}
	// The connection's default VFS is memdb: name the file's own.
	exec("ATTACH DATABASE ? AS tpl", "file:"+template+"?vfs=unix&mode=ro")
	rows, err := conn.QueryContext(ctx, "SELECT type, name, sql FROM tpl.sqlite_master"+
		" WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite_%'"+
		" ORDER BY type <> 'table', rowid")
	if err != nil {
		t.Fatal(err)
	}
	type object struct{ kind, name, sql string }
	var objects []object
	for rows.Next() {
		var o object
		if err := rows.Scan(&o.kind, &o.name, &o.sql); err != nil {
			t.Fatal(err)
		}
		objects = append(objects, o)
	}
	rows.Close()
	for _, o := range objects {
		exec(o.sql)
		if o.kind == "table" {
			exec(`INSERT INTO main."` + o.name + `" SELECT * FROM tpl."` + o.name + `"`)
		}
	}
	exec("DETACH DATABASE tpl")
}

func TestPlaceOrderEnqueuesOrderCreated(t *testing.T) {
	db := memoryOutbox(t)
	id, err := placeOrder(db, 42, "tea")
	if err != nil {
		t.Fatal(err)
	}
	var topic, key, payload, headers string
	err = db.QueryRow("SELECT topic, msg_key, CAST(payload AS TEXT), headers"+
		" FROM outbox_message WHERE id = ?", id).Scan(&topic, &key, &payload, &headers)
	if err != nil {
		t.Fatal(err)
	}
	if topic != "order.created" || key != "order-42" || payload != `{"item":"tea","order":42}` ||
		headers != `{"X-Producer":"go"}` {
		t.Fatalf("enqueued %s %s %s %s", topic, key, payload, headers)
	}
}

func TestARolledBackOrderEnqueuesNothing(t *testing.T) {
	db := memoryOutbox(t)
	if _, err := placeOrder(db, 42, "tea"); err != nil {
		t.Fatal(err)
	}
	if _, err := placeOrder(db, 42, "tea"); err == nil { // the order exists: rolled back
		t.Fatal("a second order 42 was placed")
	}
	var count int
	if err := db.QueryRow("SELECT count(*) FROM outbox").Scan(&count); err != nil {
		t.Fatal(err)
	}
	if count != 1 {
		t.Fatalf("%d messages, want 1", count)
	}
}
