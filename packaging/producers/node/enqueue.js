// An order and its outbox message in one SQLite transaction, from Node.js
// (Debian's node-sqlite3). outboxd, beside the application, sends the
// message once the transaction commits.
//
//   node enqueue.js DB ORDER_ID ITEM
'use strict';
const sqlite3 = require('sqlite3');

// db.run as a promise; resolves with the statement (lastID, changes).
function run(db, sql, params = []) {
  return new Promise((resolve, reject) => {
    db.run(sql, params, function done(err) {
      if (err) reject(err);
      else resolve(this);
    });
  });
}

// Adds one message inside the open transaction: it commits or rolls back
// with the caller's own rows. The schema's trigger checks the fields; its
// error says which one ("outbox: topic: must be a non-empty string").
async function enqueue(db, topic, key, payload, headers = null) {
  const statement = await run(db,
    'INSERT INTO outbox(topic, msg_key, payload, headers) VALUES(?, ?, ?, ?)',
    [topic, key, Buffer.from(payload), headers === null ? null : JSON.stringify(headers)]);
  return statement.lastID;
}

async function placeOrder(db, id, item) {
  await run(db, 'BEGIN IMMEDIATE');
  try {
    await run(db, 'INSERT INTO orders(id, item) VALUES(?, ?)', [id, item]);
    const messageId = await enqueue(db, 'order.created', `order-${id}`,
      JSON.stringify({ order: id, item }), { 'X-Producer': 'node' });
    await run(db, 'COMMIT');
    return messageId;
  } catch (err) {
    await run(db, 'ROLLBACK');
    throw err;
  }
}

async function main() {
  const [dbPath, orderId, item] = process.argv.slice(2);
  if (item === undefined || !/^\d+$/.test(orderId)) {
    console.error('usage: node enqueue.js DB ORDER_ID ITEM');
    return 2;
  }
  const db = new sqlite3.Database(dbPath);
  db.configure('busyTimeout', 5000);
  try {
    console.log(await placeOrder(db, Number(orderId), item));
    return 0;
  } catch (err) {
    console.error(`enqueue: ${err.message}`);
    return 1;
  } finally {
    db.close();
  }
}

if (require.main === module) {
  main().then((status) => { process.exitCode = status; });
}
module.exports = { enqueue, placeOrder };
