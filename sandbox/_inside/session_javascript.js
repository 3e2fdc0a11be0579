// The JavaScript session's driver: one persistent `vm` context on the cell channel.
//
// Runs as the session's uid under node (`node -e <this file>`), speaking the channel of
// session_channel.py: cells arrive on fd 3 (4-byte length, JSON), messages leave on fd 4
// (kind byte, 4-byte length, JSON). Each cell is a `vm.Script` run in the same context, so
// top-level declarations, functions and required modules persist; the value of its last
// expression is displayed (a promise is awaited first). SIGINT stops a running cell
// (`breakOnSigint`) or the wait for its promise; the context survives. Between cells the
// event loop runs, so timers keep working.
'use strict';

const fs = require('fs');
const util = require('util');
const vm = require('vm');

const COMMANDS_FD = 3;
const MESSAGES_FD = 4;

function writeAll(buffer) {
  let offset = 0;
  while (offset < buffer.length) {
    try {
      offset += fs.writeSync(MESSAGES_FD, buffer, offset);
    } catch (error) {
      if (error.code !== 'EAGAIN') throw error;
    }
  }
}

function send(kind, payload) {
  const body = Buffer.from(JSON.stringify(payload));
  const head = Buffer.alloc(5);
  head.write(kind, 0, 'latin1');
  head.writeUInt32BE(body.length, 1);
  writeAll(Buffer.concat([head, body]));
}

const context = vm.createContext({
  console, require, process, Buffer, URL, TextEncoder, TextDecoder,
  setTimeout, setInterval, setImmediate, clearTimeout, clearInterval, clearImmediate,
  queueMicrotask, structuredClone,
});

let interruptWaiting = null;
process.on('SIGINT', () => {
  if (interruptWaiting !== null) interruptWaiting();
});

function describe(error) {
  if (error instanceof Error || (error && typeof error === 'object' && 'stack' in error)) {
    return { name: String(error.name || 'Error'), value: String(error.message || ''),
             traceback: String(error.stack || '') };
  }
  return { name: 'Error', value: util.inspect(error), traceback: '' };
}

let count = 0;

async function runCell(command) {
  count += 1;
  let error = null;
  try {
    const script = new vm.Script(String(command.code || ''), { filename: `cell-${count}.js` });
    let value = script.runInContext(context, { breakOnSigint: true, displayErrors: false });
    if (value && typeof value.then === 'function') {
      value = await Promise.race([
        value,
        new Promise((resolve, reject) => {
          interruptWaiting = () => reject(Object.assign(new Error('interrupted'), {
            name: 'KeyboardInterrupt' }));
        }),
      ]);
    }
    if (value !== undefined) {
      send('d', { kind: 'result', data: { 'text/plain': util.inspect(value) }, binary: [] });
    }
  } catch (caught) {
    error = describe(caught);
    if (/^Script execution (was )?interrupted/.test(error.value)) error.name = 'KeyboardInterrupt';
  } finally {
    interruptWaiting = null;
  }
  send('r', { seq: command.seq, count, error });
}

let pending = Buffer.alloc(0);
let queue = Promise.resolve();
const commands = fs.createReadStream(null, { fd: COMMANDS_FD });
commands.on('data', (chunk) => {
  pending = Buffer.concat([pending, chunk]);
  while (pending.length >= 4) {
    const size = pending.readUInt32BE(0);
    if (pending.length < 4 + size) break;
    const command = JSON.parse(pending.subarray(4, 4 + size).toString('utf8'));
    pending = pending.subarray(4 + size);
    queue = queue.then(() => runCell(command));
  }
});
commands.on('end', () => process.exit(0));
send('k', { count: 0 });
