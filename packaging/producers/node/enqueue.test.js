// Testing placeOrder in memory with plain SQL (docs/producers-languages.md,
// "Testing in memory"): a fresh database per test, the outbox schema copied
// from a file that `outboxctl --db FILE init` made, the rows read back.
//
//   OUTBOX_SCHEMA_DB=schema.db node --test enqueue.test.js
'use strict';
const assert = require('node:assert');
const test = require('node:test');
const sqlite3 = require('sqlite3');
const { placeOrder } = require('./enqueue.js');

function call(db, method, sql, params = []) {
  return new Promise((resolve, reject) => {
    db[method](sql, params, (err, result) => (err ? reject(err) : resolve(result)));
  });
}

// A database in this process's memory (SQLite's memdb VFS), with the outbox
// schema: tables with their rows first, then indexes, views and triggers.
async function memoryOutbox(name) {
  const template = process.env.OUTBOX_SCHEMA_DB;
  if (!template) throw new Error('OUTBOX_SCHEMA_DB: name a file made by `outboxctl --db FILE init`');
  const db = new sqlite3.Database(`file:/${name}?vfs=memdb`,
    sqlite3.OPEN_READWRITE | sqlite3.OPEN_CREATE | sqlite3.OPEN_URI);
  db.configure('busyTimeout', 5000);
  // The default VFS of this connection is memdb: name the file's own.
  await call(db, 'run', 'ATTACH DATABASE ? AS tpl', [`file:${template}?vfs=unix&mode=ro`]);
  const objects = await call(db, 'all', "SELECT type, name, sql FROM tpl.sqlite_master" +
    " WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite_%' ORDER BY type <> 'table', rowid");
  for (const { type, name: object, sql } of objects) {
    await call(db, 'run', sql);
    if (type === 'table') await call(db, 'run', `INSERT INTO main."${object}" SELECT * FROM tpl."${object}"`);
  }
  await call(db, 'run', 'DETACH DATABASE tpl');
  await call(db, 'run', 'CREATE TABLE orders(id INTEGER PRIMARY KEY, item TEXT NOT NULL)');
  return db;
}

test('placeOrder enqueues order.created', async () => {
  const db = await memoryOutbox('enqueues');
  const id = await placeOrder(db, 42, 'tea');
  const row = await call(db, 'get', 'SELECT topic, msg_key, CAST(payload AS TEXT) AS payload,' +
    ' headers FROM outbox_message WHERE id = ?', [id]);
  assert.deepStrictEqual(row, { topic: 'order.created', msg_key: 'order-42',
    payload: '{"order":42,"item":"tea"}', headers: '{"X-Producer":"node"}' });
  db.close();
});

test('a rolled-back order enqueues nothing', async () => {
  const db = await memoryOutbox('rolled-back');
  await placeOrder(db, 42, 'tea');
  await assert.rejects(placeOrder(db, 42, 'tea'));  // the order exists: rolled back
  assert.deepStrictEqual(await call(db, 'get', 'SELECT count(*) AS n FROM outbox'), { n: 1 });
  db.close();
});
