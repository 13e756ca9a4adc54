'use strict';
// One interop scenario run by tests/interop/test_ali_ons.py with ali-ons (a RocketMQ 4.x remoting client
// written by others) against rmqops' mqbroker. Input: one JSON argument. Output: one JSON line on stdout.
// Only ali-ons' public API is used, except for transactions, which ali-ons does not implement: there the
// scenario sends END_TRANSACTION and answers CHECK_TRANSACTION_STATE through ali-ons' own remoting client
// (RemotingCommand + its broker connection), with the header fields RocketMQ defines.

const { Consumer, Producer, Message } = require('ali-ons');
const RemotingCommand = require('ali-ons/lib/protocol/command/remoting_command');
const MessageDecoder = require('ali-ons/lib/message/message_decoder');
const ByteBuffer = require('byte');
const crypto = require('crypto');

const cfg = JSON.parse(process.argv[2]);
const httpclient = {}; // ali-ons asserts one exists; unused when nameSrv is given
const creds = cfg.accessKey ? { accessKey: cfg.accessKey, secretKey: cfg.secretKey } : {};
const quietLogger = { info() {}, debug() {}, warn() {}, error() {} };

const END_TRANSACTION = 37;
const CHECK_TRANSACTION_STATE = 39;
const COMMIT = 8;
const ROLLBACK = 12;

function sleep(ms) { return new Promise(r => setTimeout(r, ms)); }

async function waitFor(cond, timeoutMs) {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline) return false;
    await sleep(50);
  }
  return true;
}

function newProducer(extra = {}) {
  return new Producer(Object.assign({ httpclient, nameSrv: cfg.namesrv, producerGroup: cfg.group + '_P',
    logger: quietLogger, instanceName: 'p' + process.pid, heartbeatBrokerInterval: 1000 }, creds, extra));
}

function newConsumer(name, extra = {}) {
  return new Consumer(Object.assign({ httpclient, nameSrv: cfg.namesrv, consumerGroup: cfg.group,
    consumeFromWhere: 'CONSUME_FROM_FIRST_OFFSET', rebalanceInterval: 1000, logger: quietLogger,
    instanceName: name, heartbeatBrokerInterval: 1000, persistConsumerOffsetInterval: 1000 }, creds, extra));
}

function record(msg, who) {
  return { who, msgId: msg.msgId, topic: msg.topic, tags: msg.tags, keys: msg.keys, body: msg.body.toString(),
    queueId: msg.queueId, queueOffset: msg.queueOffset, reconsumeTimes: msg.reconsumeTimes,
    storeTimestamp: msg.storeTimestamp, receivedAt: Date.now() };
}

async function clusterTags() {
  const received = [];
  const consumers = [ newConsumer('c1'), newConsumer('c2') ];
  consumers.forEach((c, i) => {
    c.on('error', () => {});
    c.subscribe(cfg.topic, 'TagA', async msg => { received.push(record(msg, 'c' + (i + 1))); });
  });
  await Promise.all(consumers.map(c => c.ready()));
  // both clients rebalanced (rebalanceInterval 1 s): each owns a share of the topic's queues
  const owned = c => Array.from(c._processQueueTable.values()).filter(v => v.messageQueue.topic === cfg.topic).length;
  const split = await waitFor(() => consumers.every(c => owned(c) > 0), 20000);
  await sleep(500);
  const producer = newProducer();
  await producer.ready();
  const sent = [];
  for (let i = 0; i < cfg.n; i++) {
    const tag = i % 2 === 0 ? 'TagA' : 'TagB';
    const msg = new Message(cfg.topic, tag, `body-${i}`);
    msg.keys = [ `key-${i}` ];
    const r = await producer.send(msg);
    sent.push({ msgId: r.msgId, tag, body: `body-${i}`, status: r.sendStatus, queueId: r.messageQueue.queueId });
  }
  const want = sent.filter(s => s.tag === 'TagA').length;
  await waitFor(() => new Set(received.map(r => r.body)).size >= want, 20000);
  await sleep(1000); // anything arriving late (a TagB leak) is caught too
  await producer.close();
  await Promise.all(consumers.map(c => c.close()));
  return { sent, received, split };
}

async function ordered() {
  const received = [];
  const consumer = newConsumer('c1');
  consumer.on('error', () => {});
  consumer.subscribe(cfg.topic, '*', async msg => {
    received.push(record(msg, 'c1'));
    await sleep(5); // a slow handler must still see the queue's order
  });
  await consumer.ready();
  const producer = newProducer();
  await producer.ready();
  // ali-ons picks the queue id at index md5(key) % n but treats queue id 0 as "no choice" (`|| ''`),
  // so use a key that does not map to queue 0
  let key = 'order-0';
  for (let k = 1; crypto.createHash('md5').update(key).digest().readUInt32BE() % cfg.queues === 0; k++) {
    key = `order-${k}`;
  }
  const sent = [];
  for (let i = 0; i < cfg.n; i++) {
    const msg = new Message(cfg.topic, 'Order', `seq-${i}`);
    msg.shardingKey = key;
    const r = await producer.send(msg);
    sent.push({ msgId: r.msgId, body: `seq-${i}`, queueId: r.messageQueue.queueId });
  }
  await waitFor(() => received.length >= cfg.n, 20000);
  await producer.close();
  await consumer.close();
  return { sent, received };
}

async function delayed() {
  const received = [];
  const consumer = newConsumer('c1');
  consumer.on('error', () => {});
  consumer.subscribe(cfg.topic, '*', async msg => { received.push(record(msg, 'c1')); });
  await consumer.ready();
  const producer = newProducer();
  await producer.ready();
  const msg = new Message(cfg.topic, 'Delay', 'delayed-body');
  msg.delayTimeLevel = cfg.delayLevel;
  const sentAt = Date.now();
  const r = await producer.send(msg);
  await waitFor(() => received.length >= 1, 30000);
  await producer.close();
  await consumer.close();
  return { sent: [ { msgId: r.msgId, sentAt, status: r.sendStatus } ], received };
}

async function transaction() {
  const received = [];
  const checks = [];
  const consumer = newConsumer('c1');
  consumer.on('error', () => {});
  consumer.subscribe(cfg.topic, '*', async msg => { received.push(record(msg, 'c1')); });
  await consumer.ready();
  const producer = newProducer();
  await producer.ready();
  const api = producer._mqClient; // ali-ons' MQClient: its remoting client and broker connections
  // Check-back: the broker asks on the producer's connection; answer COMMIT for "tx-commit-by-check".
  api.on('request', (entity, address) => {
    const req = entity.data;
    if (req.code !== CHECK_TRANSACTION_STATE) return;
    const h = req.extFields;
    const msg = MessageDecoder.decode(ByteBuffer.wrap(req.body));
    checks.push({ body: msg.body.toString(), header: h });
    const end = RemotingCommand.createRequestCommand(END_TRANSACTION, {
      producerGroup: producer.producerGroup, tranStateTableOffset: h.tranStateTableOffset,
      commitLogOffset: h.commitLogOffset, commitOrRollback: COMMIT, fromTransactionCheck: true,
      msgId: msg.properties.UNIQ_KEY || h.msgId, transactionId: h.transactionId, topic: msg.topic,
    });
    api.invokeOneway(address, end).catch(() => {});
  });
  async function half(body) {
    const msg = new Message(cfg.topic, 'Tx', body);
    msg.properties.TRAN_MSG = 'true';
    msg.properties.PGROUP = producer.producerGroup;
    const r = await producer.send(msg);
    return { r, msg };
  }
  async function end(h, state) {
    const addr = api.findBrokerAddressInPublish(h.r.messageQueue.brokerName);
    const offsetInfo = MessageDecoder.decodeMessageId(h.r.msgId); // ali-ons' msgId is the broker's offset id
    const cmd = RemotingCommand.createRequestCommand(END_TRANSACTION, {
      producerGroup: producer.producerGroup, tranStateTableOffset: h.r.queueOffset,
      commitLogOffset: Number(offsetInfo.offset.toString()), commitOrRollback: state,
      fromTransactionCheck: false, msgId: h.r.msgId, transactionId: h.r.msgId, topic: cfg.topic,
    });
    await api.invokeOneway(addr, cmd);
  }
  const committed = await half('tx-commit');
  await end(committed, COMMIT);
  const rolledBack = await half('tx-rollback');
  await end(rolledBack, ROLLBACK);
  const unknown = await half('tx-commit-by-check'); // no END_TRANSACTION: the broker must check back
  const ok = await waitFor(() => received.length >= 2, cfg.waitMs || 30000);
  await sleep(1500); // a rolled-back message leaking would arrive by now
  await producer.close();
  await consumer.close();
  return { ok, sent: [ committed.r, rolledBack.r, unknown.r ].map(r => ({ msgId: r.msgId, status: r.sendStatus })),
    received, checks: checks.map(c => c.body) };
}

async function retry() {
  const received = [];
  const consumer = newConsumer('c1');
  consumer.on('error', () => {});
  const seen = new Set();
  consumer.subscribe(cfg.topic, '*', async msg => {
    received.push(record(msg, 'c1'));
    const body = msg.body.toString();
    if (!seen.has(body)) {
      seen.add(body);
      return Consumer.ACTION_RETRY; // first delivery fails: the broker must deliver it again
    }
  });
  await consumer.ready();
  const producer = newProducer();
  await producer.ready();
  const sent = [];
  for (let i = 0; i < cfg.n; i++) {
    const r = await producer.send(new Message(cfg.topic, 'Retry', `retry-${i}`));
    sent.push({ msgId: r.msgId, body: `retry-${i}` });
  }
  await waitFor(() => received.length >= 2 * cfg.n, cfg.waitMs || 40000);
  await producer.close();
  await consumer.close();
  return { sent, received };
}

async function sendOnly() {
  // the producer alone, e.g. with wrong credentials: report the error instead of throwing
  const producer = newProducer();
  const codes = [];
  // ali-ons retries a refused send and then throws a generic error: record the broker's codes on the way
  const kernel = producer.sendKernelImpl.bind(producer);
  producer.sendKernelImpl = async (msg, mq) => {
    try {
      return await kernel(msg, mq);
    } catch (err) {
      codes.push({ code: err.code, message: String(err.message).split('\n')[0] });
      throw err;
    }
  };
  try {
    await producer.ready();
    // a body over 4 KiB (cfg.bodySize) is zlib-compressed by ali-ons, as by the Java client
    const msg = new Message(cfg.topic, 'X', cfg.bodySize ? 'a'.repeat(cfg.bodySize) : 'x');
    for (const [k, v] of Object.entries(cfg.props || {})) msg.properties[k] = v; // user properties as given
    const r = await producer.send(msg);
    await producer.close();
    return { ok: true, status: r.sendStatus, codes };
  } catch (err) {
    return { ok: false, error: String(err && err.message || err), codes };
  }
}

const scenarios = { clusterTags, ordered, delayed, transaction, retry, sendOnly };

(async () => {
  const fn = scenarios[cfg.scenario];
  if (!fn) throw new Error('unknown scenario ' + cfg.scenario);
  const out = await fn();
  process.stdout.write(JSON.stringify(out) + '\n');
  process.exit(0);
})().catch(err => {
  process.stdout.write(JSON.stringify({ fatal: String(err && err.stack || err) }) + '\n');
  process.exit(2);
});
