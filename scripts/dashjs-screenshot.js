// Play a DASH stream with dash.js in headless Chromium and take a screenshot
// once the video has played (issue 33, "A real player"; docs/DASH.md).
//
//   node scripts/dashjs-screenshot.js PAGE_URL OUT.png [SECONDS]
//
// PAGE_URL is a page that plays the stream with dash.js and keeps
// `document.title` at `t=<currentTime> w=<videoWidth> ...` (or `error ...`),
// as scripts/dashjs-player.html does. Chromium is driven over the DevTools
// protocol on a pipe (--remote-debugging-pipe: no extra packages). Prints one
// JSON line {currentTime, videoWidth, title, png} and exits 0 once
// currentTime > 1 s, 1 otherwise (after SECONDS, default 40).
'use strict';
const { spawn } = require('child_process');
const fs = require('fs');
const os = require('os');
const path = require('path');

const [pageUrl, out, secs] = process.argv.slice(2);
if (!pageUrl || !out) {
  console.error('usage: node dashjs-screenshot.js PAGE_URL OUT.png [SECONDS]');
  process.exit(2);
}
const deadline = Date.now() + 1000 * Number(secs || 40);
const browser = process.env.CHROMIUM || 'chromium';
const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'dashjs-chromium-'));
const chrome = spawn(browser, [
  '--headless', '--no-sandbox', '--disable-gpu', '--remote-debugging-pipe',
  '--autoplay-policy=no-user-gesture-required', '--window-size=640,400',
  '--no-first-run', '--mute-audio', `--user-data-dir=${profile}`, 'about:blank',
], { stdio: ['ignore', 'ignore', 'pipe', 'pipe', 'pipe'] });
let stderr = '';
chrome.stdio[2].on('data', (d) => { stderr = (stderr + d).slice(-4000); });

let nextId = 1;
const waiting = new Map();
let inbuf = '';
chrome.stdio[4].on('data', (d) => {
  inbuf += d.toString();
  let i;
  while ((i = inbuf.indexOf('\0')) >= 0) {
    const msg = JSON.parse(inbuf.slice(0, i));
    inbuf = inbuf.slice(i + 1);
    if (msg.id && waiting.has(msg.id)) {
      const { resolve, reject } = waiting.get(msg.id);
      waiting.delete(msg.id);
      if (msg.error) reject(new Error(JSON.stringify(msg.error))); else resolve(msg.result);
    }
  }
});
function send(method, params = {}, sessionId) {
  const id = nextId++;
  const m = { id, method, params };
  if (sessionId) m.sessionId = sessionId;
  chrome.stdio[3].write(JSON.stringify(m) + '\0');
  return new Promise((resolve, reject) => waiting.set(id, { resolve, reject }));
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

let finished = false;
function finish(code, result) {
  if (finished) return;
  finished = true;
  console.log(JSON.stringify(result));
  if (code !== 0 && stderr) console.error(stderr);
  chrome.once('exit', () => {
    try { fs.rmSync(profile, { recursive: true, force: true }); } catch (e) { /* left in tmp */ }
    process.exit(code);
  });
  chrome.kill();
}

(async () => {
  const { targetId } = await send('Target.createTarget', { url: 'about:blank' });
  const { sessionId } = await send('Target.attachToTarget', { targetId, flatten: true });
  await send('Page.enable', {}, sessionId);
  await send('Page.navigate', { url: pageUrl }, sessionId);
  let state = {};
  while (Date.now() < deadline) {
    await sleep(250);
    const r = await send('Runtime.evaluate', {
      expression: `(() => { const v = document.querySelector('video');
        return JSON.stringify({ currentTime: v ? v.currentTime : 0,
          videoWidth: v ? v.videoWidth : 0, title: document.title }); })()`,
      returnByValue: true,
    }, sessionId);
    state = JSON.parse(r.result.value || '{}');
    if (state.currentTime > 1 && state.videoWidth > 0) break;
    if ((state.title || '').startsWith('error')) break;
  }
  const shot = await send('Page.captureScreenshot', { format: 'png' }, sessionId);
  fs.writeFileSync(out, Buffer.from(shot.data, 'base64'));
  state.png = out;
  finish(state.currentTime > 1 && state.videoWidth > 0 ? 0 : 1, state);
})().catch((e) => finish(1, { error: String(e) }));
