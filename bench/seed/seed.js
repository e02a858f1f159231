'use strict';
// The seed system pdfbatch replaces, rebuilt from its design as the bench's reference column (issue 15;
// driven by bench/seed_compare.py). One BullMQ job per ZIP; the worker unpacks it with adm-zip and runs
// one task per PDF, five at a time (p-limit): pdf-parse 1.1.1 -> the email regex -> the first address in
// document order that belongs to a user -> UPDATE ... AND pdf_url IS NULL -> S3 PUT -> Redis counters
// (WATCH/MULTI). The one fix applied to the seed's code: pdf-parse gets a Uint8Array copy of each PDF,
// because a small Buffer that comes from Node's pool is misread (pdf.js takes its whole ArrayBuffer).
//
//   node seed.js worker                      serve the queue until SIGTERM (prints "ready" once listening)
//   node seed.js enqueue BATCH_ID ZIP_PATH   stamp enqueuedAt and add the ZIP's job
//
// Settings come from the environment: SEED_REDIS_URL, SEED_MYSQL_URL, SEED_S3_ENDPOINT, SEED_BUCKET.
// Progress lives in the hash seed:batch:{id}: total, processed, one field per outcome, status,
// enqueuedAt and doneAt (ms since the epoch). Nothing personal is logged.

const { Queue, Worker } = require('bullmq');
const AdmZip = require('adm-zip');
const pLimit = require('p-limit');
const pdf = require('pdf-parse');
const mysql = require('mysql2/promise');
const Redis = require('ioredis');
const { S3Client, PutObjectCommand } = require('@aws-sdk/client-s3');

const QUEUE = 'seed-zips';
const CONCURRENCY = 5;
const EMAIL = /[a-zA-Z0-9._%+-]+@[a-zA-Z0-9.-]+\.[a-zA-Z]{2,}/g;

function setting(name, fallback) {
  const value = process.env[name] || fallback;
  if (!value) throw new Error(`${name} is not set`);
  return value;
}

const REDIS_URL = setting('SEED_REDIS_URL', 'redis://127.0.0.1:6379/8');
const batchKey = (batchId) => `seed:batch:${batchId}`;

function redis() {
  // BullMQ's blocking connections need maxRetriesPerRequest null.
  return new Redis(REDIS_URL, { maxRetriesPerRequest: null });
}

async function enqueue(batchId, zipPath) {
  const conn = redis();
  const queue = new Queue(QUEUE, { connection: conn });
  await conn.hset(batchKey(batchId), 'status', 'QUEUED', 'enqueuedAt', Date.now());
  await queue.add('zip', { batchId, zipPath }, { removeOnComplete: true, removeOnFail: 100 });
  await queue.close();
  await conn.quit();
}

// Each file is counted with an optimistic transaction: WATCH the hash, read it, MULTI the increments,
// EXEC; a null EXEC means another task changed the hash in between, so read and try again. WATCH belongs
// to a connection, so each concurrent task holds a connection of its own.
async function count(conn, key, outcome) {
  for (;;) {
    await conn.watch(key);
    const [processed, total] = await conn.hmget(key, 'processed', 'total');
    const tx = conn.multi().hincrby(key, 'processed', 1).hincrby(key, outcome, 1);
    if (Number(processed || 0) + 1 >= Number(total)) tx.hset(key, 'status', 'COMPLETED', 'doneAt', Date.now());
    if (await tx.exec()) return;
  }
}

function firstEmails(text) {
  const seen = new Set();
  for (const match of text.match(EMAIL) || []) seen.add(match.toLowerCase());
  return [...seen];
}

async function processPdf(ctx, entry, conn) {
  const data = entry.getData();
  let text;
  try {
    text = (await pdf(new Uint8Array(data))).text;
  } catch (err) {
    return 'failed';
  }
  const emails = firstEmails(text);
  if (emails.length === 0) return 'skipped_no_match';
  const [rows] = await ctx.db.query('SELECT id, email FROM users WHERE email IN (?)', [emails]);
  const byEmail = new Map(rows.map((r) => [String(r.email).toLowerCase(), r]));
  const user = emails.map((e) => byEmail.get(e)).find(Boolean);
  if (!user) return 'skipped_no_match';
  const key = `pdfs/${user.id}/${entry.entryName}`;
  const [result] = await ctx.db.execute('UPDATE users SET pdf_url=? WHERE id=? AND pdf_url IS NULL', [
    `s3://${ctx.bucket}/${key}`,
    user.id,
  ]);
  if (result.affectedRows === 0) return 'skipped_already_exists';
  await ctx.s3.send(
    new PutObjectCommand({ Bucket: ctx.bucket, Key: key, Body: data, ContentType: 'application/pdf' }),
  );
  return 'linked';
}

async function processZip(ctx, job) {
  const { batchId, zipPath } = job.data;
  const key = batchKey(batchId);
  const zip = new AdmZip(zipPath);
  const entries = zip.getEntries().filter((e) => !e.isDirectory && e.entryName.toLowerCase().endsWith('.pdf'));
  await ctx.counter.hset(key, 'total', entries.length, 'status', 'PROCESSING', 'startedAt', Date.now());
  if (entries.length === 0) {
    await ctx.counter.hset(key, 'status', 'COMPLETED', 'doneAt', Date.now());
    return;
  }
  const limit = pLimit(CONCURRENCY);
  await Promise.all(
    entries.map((entry) =>
      limit(async () => {
        const conn = ctx.connections.pop();
        try {
          let outcome;
          try {
            outcome = await processPdf(ctx, entry, conn);
          } catch (err) {
            process.stderr.write(`file failed: ${err.name} ${err.code || ''}\n`);
            outcome = 'failed';
          }
          await count(conn, key, outcome);
        } finally {
          ctx.connections.push(conn);
        }
      }),
    ),
  );
}

async function serve() {
  const ctx = {
    bucket: setting('SEED_BUCKET'),
    db: mysql.createPool({ uri: setting('SEED_MYSQL_URL'), connectionLimit: CONCURRENCY }),
    s3: new S3Client({
      endpoint: setting('SEED_S3_ENDPOINT', 'http://127.0.0.1:4566'),
      forcePathStyle: true,
      region: process.env.AWS_DEFAULT_REGION || 'us-east-1',
      credentials: {
        accessKeyId: process.env.AWS_ACCESS_KEY_ID || 'test',
        secretAccessKey: process.env.AWS_SECRET_ACCESS_KEY || 'test',
      },
    }),
    counter: redis(),
    connections: Array.from({ length: CONCURRENCY }, redis),
  };
  const worker = new Worker(QUEUE, (job) => processZip(ctx, job), { connection: redis(), concurrency: 1 });
  worker.on('failed', (job, err) => process.stderr.write(`job failed: ${err.name}\n`));
  await worker.waitUntilReady();
  await ctx.db.query('SELECT 1');
  process.stdout.write('ready\n');
  const stop = async () => {
    await worker.close();
    await ctx.db.end();
    for (const c of [ctx.counter, ...ctx.connections]) c.disconnect();
    process.exit(0);
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
}

async function main(argv) {
  if (argv[0] === 'worker') return serve();
  if (argv[0] === 'enqueue' && argv.length === 3) return enqueue(argv[1], argv[2]);
  throw new Error('usage: node seed.js worker | node seed.js enqueue BATCH_ID ZIP_PATH');
}

main(process.argv.slice(2)).catch((err) => {
  process.stderr.write(`${err.stack || err}\n`);
  process.exit(1);
});
