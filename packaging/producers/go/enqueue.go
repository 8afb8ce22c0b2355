// An order and its outbox message in one SQLite transaction, from Go
// (database/sql with github.com/mattn/go-sqlite3). outboxd, beside the
// application, sends the message once the transaction commits.
//
//	go run enqueue.go DB ORDER_ID ITEM
package main

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"os"

	_ "github.com/mattn/go-sqlite3"
)

// enqueue adds one message inside tx: it commits or rolls back with the
// caller's own rows. The schema's trigger checks the fields; its error says
// which one ("outbox: topic: must be a non-empty string").
func enqueue(tx *sql.Tx, topic, key string, payload []byte, headers map[string]string) (int64, error) {
	var headersJSON any // NULL without headers
	if headers != nil {
		text, err := json.Marshal(headers)
		if err != nil {
			return 0, err
		}
		headersJSON = string(text)
	}
	result, err := tx.Exec(
		"INSERT INTO outbox(topic, msg_key, payload, headers) VALUES(?, ?, ?, ?)",
		topic, key, payload, headersJSON)
	if err != nil {
		return 0, err
	}
	return result.LastInsertId()
}

func placeOrder(db *sql.DB, id int64, item string) (int64, error) {
	tx, err := db.Begin() // BEGIN IMMEDIATE: _txlock=immediate in the DSN
	if err != nil {
		return 0, err
	}
	defer tx.Rollback() // a no-op after Commit
	if _, err := tx.Exec("INSERT INTO orders(id, item) VALUES(?, ?)", id, item); err != nil {
		return 0, err
	}
	payload, _ := json.Marshal(map[string]any{"order": id, "item": item})
	msgID, err := enqueue(tx, "order.created", fmt.Sprintf("order-%d", id), payload,
		map[string]string{"X-Producer": "go"})
	if err != nil {
		return 0, err
	}
	return msgID, tx.Commit()
}

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: enqueue DB ORDER_ID ITEM")
		os.Exit(2)
	}
	var id int64
	if _, err := fmt.Sscan(os.Args[2], &id); err != nil {
		fmt.Fprintln(os.Stderr, "enqueue: ORDER_ID:", err)
		os.Exit(2)
	}
	db, err := sql.Open("sqlite3", "file:"+os.Args[1]+"?_busy_timeout=5000&_txlock=immediate")
	if err != nil {
		fmt.Fprintln(os.Stderr, "enqueue:", err)
		os.Exit(1)
	}
	defer db.Close()
	msgID, err := placeOrder(db, id, os.Args[3])
	if err != nil {
		fmt.Fprintln(os.Stderr, "enqueue:", err)
		os.Exit(1)
	}
	fmt.Println(msgID)
}
