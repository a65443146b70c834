// The channel of a JavaScript split run, shared by both sides (split_trusted.js, split_candidate.js):
// length-prefixed JSON messages on two pipes, and the encoding of values.
//
// Plain data crosses by copy: numbers (NaN, the infinities and -0 too), strings, booleans, null,
// undefined, bigints, arrays (whose elements are plain) and objects whose prototype is
// Object.prototype or null, with data properties only. Anything else is a handle: an id the owner
// resolves to its own object. The decoder builds new values from JSON alone and never runs code
// the peer sent; a property named __proto__ becomes an own property, never a prototype.
/* exported editforgeChannel, editforgeCodec */

const editforgeChannel = (fs, readFd, writeFd) => {
  const MAX_MESSAGE = 32 << 20;
  const header = Buffer.alloc(4);
  const readExact = (buffer) => {
    let got = 0;
    while (got < buffer.length) {
      let n;
      try {
        n = fs.readSync(readFd, buffer, got, buffer.length - got, null);
      } catch (err) {
        if (err.code === 'EAGAIN') { continue; }
        throw err;
      }
      if (n === 0) { throw new Error('the channel closed (the other process ended)'); }
      got += n;
    }
  };
  return {
    send(message) {
      const body = Buffer.from(JSON.stringify(message), 'utf8');
      const all = Buffer.alloc(4 + body.length);
      all.writeUInt32BE(body.length, 0);
      body.copy(all, 4);
      let sent = 0;
      while (sent < all.length) { sent += fs.writeSync(writeFd, all, sent, all.length - sent); }
    },
    receive() {
      readExact(header);
      const size = header.readUInt32BE(0);
      if (size > MAX_MESSAGE) { throw new Error(`a ${size}-byte message exceeds the ${MAX_MESSAGE}-byte bound`); }
      const body = Buffer.alloc(size);
      readExact(body);
      const message = JSON.parse(body.toString('utf8'));
      if (message === null || typeof message !== 'object' || Array.isArray(message)) {
        throw new Error('a message that is not an object');
      }
      return message;
    },
  };
};

// toHandle(value) -> an encoded handle for a value that is not plain data (the side's own rules);
// fromHandle(encoded) -> the value an encoded handle stands for on this side.
const editforgeCodec = (toHandle, fromHandle) => {
  const MAX_DEPTH = 64;
  const MAX_VALUES = 1000000;
  const SPECIAL = { NaN: NaN, Infinity: Infinity, '-Infinity': -Infinity, '-0': -0 };
  const isPlainObject = (value) => {
    const proto = Object.getPrototypeOf(value);
    return proto === Object.prototype || proto === null;
  };
  const encode = (value, depth = 0, seen = new Set(), count = { n: 0 }) => {
    if (++count.n > MAX_VALUES) { throw new RangeError('a value of more than a million parts cannot cross'); }
    switch (typeof value) {
      case 'number':
        if (Number.isFinite(value) && !Object.is(value, -0)) { return value; }
        return { $: 'num', v: Object.is(value, -0) ? '-0' : String(value) };
      case 'string': case 'boolean': return value;
      case 'undefined': return { $: 'undefined' };
      case 'bigint': return { $: 'bigint', v: value.toString() };
      case 'symbol': case 'function': return toHandle(value);
      default: break;
    }
    if (value === null) { return null; }
    if (depth >= MAX_DEPTH) { throw new RangeError(`a value nested more than ${MAX_DEPTH} deep cannot cross`); }
    if (seen.has(value)) { throw new TypeError('a cyclic value cannot cross'); }
    if (Array.isArray(value) && Object.getPrototypeOf(value) === Array.prototype && !isProxy(value)) {
      seen.add(value);
      const items = [];
      for (let i = 0; i < value.length; i++) {
        const own = Object.getOwnPropertyDescriptor(value, i);
        if (own && !('value' in own)) { seen.delete(value); return toHandle(value); }
        items.push(encode(own ? own.value : undefined, depth + 1, seen, count));
      }
      seen.delete(value);
      return items;
    }
    if (isPlainObject(value) && !isProxy(value)) {
      const entries = [];
      seen.add(value);
      for (const key of Reflect.ownKeys(value)) {
        const own = Object.getOwnPropertyDescriptor(value, key);
        if (typeof key !== 'string' || !('value' in own)) { seen.delete(value); return toHandle(value); }
        if (own.enumerable) { entries.push([key, encode(own.value, depth + 1, seen, count)]); }
      }
      seen.delete(value);
      return { $: 'obj', v: entries };
    }
    return toHandle(value);
  };
  const decode = (data, depth = 0) => {
    if (depth > MAX_DEPTH) { throw new RangeError(`a value nested more than ${MAX_DEPTH} deep`); }
    if (data === null || typeof data === 'number' || typeof data === 'string' || typeof data === 'boolean') {
      return data;
    }
    if (Array.isArray(data)) { return data.map((item) => decode(item, depth + 1)); }
    if (typeof data !== 'object') { throw new TypeError('a malformed value'); }
    switch (data.$) {
      case 'undefined': return undefined;
      case 'num':
        if (!Object.prototype.hasOwnProperty.call(SPECIAL, data.v)) { throw new TypeError('a malformed number'); }
        return SPECIAL[data.v];
      case 'bigint':
        if (typeof data.v !== 'string' || !/^-?\d{1,20000}$/.test(data.v)) { throw new TypeError('a malformed bigint'); }
        return BigInt(data.v);
      case 'obj': {
        if (!Array.isArray(data.v)) { throw new TypeError('a malformed object'); }
        const result = {};
        for (const entry of data.v) {
          if (!Array.isArray(entry) || entry.length !== 2 || typeof entry[0] !== 'string') {
            throw new TypeError('a malformed object');
          }
          Object.defineProperty(result, entry[0], {
            value: decode(entry[1], depth + 1), writable: true, enumerable: true, configurable: true,
          });
        }
        return result;
      }
      default: return fromHandle(data);
    }
  };
  // Arrays and plain objects a call may have changed in place, and how to change them back.
  const isContainer = (value) => value !== null && typeof value === 'object' && !isProxy(value)
    && (Array.isArray(value) ? Object.getPrototypeOf(value) === Array.prototype : isPlainObject(value));
  const replaceContents = (target, fresh) => {
    if (Array.isArray(target) && Array.isArray(fresh)) {
      target.length = 0;
      fresh.forEach((item, i) => { target[i] = item; });
      return;
    }
    if (!Array.isArray(target) && fresh !== null && typeof fresh === 'object' && !Array.isArray(fresh)) {
      for (const key of Object.keys(target)) { delete target[key]; }
      for (const key of Object.keys(fresh)) {
        Object.defineProperty(target, key, { value: fresh[key], writable: true, enumerable: true, configurable: true });
      }
    }
  };
  return { encode, decode, isContainer, replaceContents };
};

// A Proxy answers Array.isArray and getPrototypeOf as its target does: the side that made one
// marks it, so that its own proxies are never taken for plain data.
const editforgeProxies = new WeakSet();
const isProxy = (value) => editforgeProxies.has(value);
