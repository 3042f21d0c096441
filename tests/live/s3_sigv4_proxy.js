// A verifying proxy in front of s3rver, which checks the access key id but
// not the signature: each request's SigV4 Authorization header is signed
// again by an independent implementation, the AWS SDK for JavaScript's
// signer (@smithy/signature-v4, hashing with @aws-crypto/sha256-js), from
// the request's method, path, query, signed headers and date and the
// credentials given here. A request whose signature differs is answered 403
// SignatureDoesNotMatch, one whose body is not the SHA-256 it declares 400
// XAmzContentSHA256Mismatch, as S3 answers them; the rest go to s3rver.
// Started by tests/live/s3_server.cc through the launcher
// scripts/fetch-sigv4-verifier.sh prints (node with those modules on its
// path):
//   s3_sigv4_proxy.js LISTEN_PORT UPSTREAM_PORT REGION ACCESS_KEY SECRET_KEY
// It writes one line per refusal to stderr, and "listening" once it is.
'use strict';

const crypto = require('crypto');
const http = require('http');
const { SignatureV4 } = require('@smithy/signature-v4');
const { Sha256 } = require('@aws-crypto/sha256-js');

const [listenPort, upstreamPort, region, accessKeyId, secretAccessKey] = process.argv.slice(2);
if (!secretAccessKey) {
  console.error('usage: s3_sigv4_proxy.js LISTEN_PORT UPSTREAM_PORT REGION ACCESS_KEY SECRET_KEY');
  process.exit(2);
}

const signer = new SignatureV4({
  credentials: { accessKeyId, secretAccessKey },
  region,
  service: 's3',
  sha256: Sha256,
  uriEscapePath: false,  // S3 signs the path as sent, not encoded twice
});

function refuse(res, status, code, message) {
  console.error(`s3_sigv4_proxy: ${status} ${code}: ${message}`);
  const body = '<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>' + code +
               '</Code><Message>' + message.replace(/&/g, '&amp;').replace(/</g, '&lt;') +
               '</Message></Error>';
  res.writeHead(status, { 'Content-Type': 'application/xml',
                          'Content-Length': Buffer.byteLength(body) });
  res.end(body);
}

// "a=1&b=%2F" -> { a: '1', b: '/' }, as the signer takes a query (it
// encodes names and values again, in SigV4's way).
function parseQuery(text) {
  const query = {};
  if (!text) return query;
  for (const part of text.split('&')) {
    const eq = part.indexOf('=');
    const name = decodeURIComponent(eq < 0 ? part : part.slice(0, eq));
    const value = eq < 0 ? '' : decodeURIComponent(part.slice(eq + 1));
    if (name in query) {
      query[name] = [].concat(query[name], value);
    } else {
      query[name] = value;
    }
  }
  return query;
}

// "20260101T120000Z" -> its Date, or null.
function parseAmzDate(text) {
  const m = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/.exec(text || '');
  if (!m) return null;
  return new Date(Date.UTC(+m[1], +m[2] - 1, +m[3], +m[4], +m[5], +m[6]));
}

// Why the request's signature is wrong, or null when it is right.
async function whyUnsigned(req, body) {
  const auth = req.headers['authorization'];
  if (!auth) return 'no Authorization header';
  const m = /^AWS4-HMAC-SHA256 Credential=([^,]+), ?SignedHeaders=([^,]+), ?Signature=([0-9a-f]{64})$/
                .exec(auth);
  if (!m) return `an Authorization header that is no SigV4 one: ${auth}`;
  const signedNames = m[2].split(';');
  // What S3 requires signed: the host and every x-amz-* header sent.
  for (const name of Object.keys(req.headers)) {
    if ((name === 'host' || name.startsWith('x-amz-')) && !signedNames.includes(name)) {
      return `header ${name} is sent but not signed (SignedHeaders=${m[2]})`;
    }
  }
  const date = parseAmzDate(req.headers['x-amz-date']);
  if (!date) return `no valid x-amz-date: ${req.headers['x-amz-date']}`;
  const declared = req.headers['x-amz-content-sha256'];
  if (!declared) return 'no x-amz-content-sha256';
  const headers = {};
  for (const name of signedNames) {
    if (!(name in req.headers)) return `signed header ${name} is not sent`;
    headers[name] = req.headers[name];
  }
  const q = req.url.indexOf('?');
  const request = {
    method: req.method,
    protocol: 'http:',
    hostname: '127.0.0.1',
    path: q < 0 ? req.url : req.url.slice(0, q),
    query: parseQuery(q < 0 ? '' : req.url.slice(q + 1)),
    headers,
    body,
  };
  const signed = await signer.sign(request, {
    signingDate: date,
    signableHeaders: new Set(signedNames),
  });
  const expected = signed.headers['authorization'];
  if (expected !== auth) return `signed as ${auth}, the AWS SDK signs ${expected}`;
  return null;
}

const server = http.createServer((req, res) => {
  const parts = [];
  req.on('data', (chunk) => parts.push(chunk));
  req.on('end', async () => {
    const body = Buffer.concat(parts);
    let why;
    try {
      why = await whyUnsigned(req, body);
    } catch (e) {
      why = `the signer failed: ${e.stack || e}`;
    }
    const target = `${req.method} ${req.url}`;
    if (why) return refuse(res, 403, 'SignatureDoesNotMatch', `${target}: ${why}`);
    const declared = req.headers['x-amz-content-sha256'];
    if (declared !== 'UNSIGNED-PAYLOAD') {
      const actual = crypto.createHash('sha256').update(body).digest('hex');
      if (declared !== actual) {
        return refuse(res, 400, 'XAmzContentSHA256Mismatch',
                      `${target}: declares ${declared}, its body hashes to ${actual}`);
      }
    }
    const headers = { ...req.headers, host: `127.0.0.1:${upstreamPort}` };
    const upstream = http.request(
        { host: '127.0.0.1', port: upstreamPort, method: req.method, path: req.url, headers },
        (answer) => {
          res.writeHead(answer.statusCode, answer.headers);
          answer.pipe(res);
        });
    upstream.on('error', (e) => refuse(res, 502, 'BadGateway', `${target}: s3rver: ${e}`));
    upstream.end(body);
  });
});
server.keepAliveTimeout = 60000;
server.listen(Number(listenPort), '127.0.0.1', () => console.error('s3_sigv4_proxy: listening'));
