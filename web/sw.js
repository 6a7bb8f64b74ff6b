// QKV Lab's service worker: once a browser has loaded the app, the next visit starts without
// downloading it again, and the page opens without a network at all (a classroom's Wi-Fi).
//
// Trunk gives the wasm and its JavaScript glue names with a content hash, so a cached copy of
// one is never stale: they are served from the cache first. The page (index.html) names the
// current ones, so it comes from the network when there is one and from the cache when not.
// Installing caches the page and the files it names, so the first visit's files are kept too.

const CACHE = "qkv-lab";
// Trunk writes the 64-bit hash in hex without leading zeros: one build in sixteen has 15 digits.
const HASHED = /[\w.-]+-[0-9a-f]{8,16}(?:_bg\.wasm|\.js)/g;

// Whether `url` names one of a build's hashed files.
function isHashed(url) {
  return new URL(url).pathname.split("/").pop().match(HASHED) !== null;
}

// Stores the page and the files it names, and drops files of older builds.
async function keepPage(response) {
  const cache = await caches.open(CACHE);
  const names = new Set((await response.clone().text()).match(HASHED) || []);
  const urls = Array.from(names, (name) => new URL(name, self.registration.scope).href);
  await cache.put(self.registration.scope, response);
  const cached = (await cache.keys()).map((request) => request.url);
  await cache.addAll(urls.filter((url) => !cached.includes(url)));
  for (const url of cached) {
    if (isHashed(url) && !urls.includes(url)) await cache.delete(url);
  }
}

self.addEventListener("install", (event) => {
  const install = fetch(self.registration.scope, { cache: "no-cache" })
    .then(keepPage)
    .then(() => self.skipWaiting())
    .catch((e) => {
      // The install fails (and the next visit tries again); the page works online meanwhile.
      console.warn(
        "QKV Lab works online only for now: the browser did not keep its files (" + e + "). " +
          "Browsers refuse to store when the disk is nearly full: free some space and reload.",
      );
      throw e;
    });
  event.waitUntil(install);
});

self.addEventListener("activate", (event) => event.waitUntil(self.clients.claim()));

self.addEventListener("fetch", (event) => {
  const request = event.request;
  if (request.method !== "GET" || new URL(request.url).origin !== self.location.origin) return;
  if (isHashed(request.url)) {
    event.respondWith(caches.match(request).then((hit) => hit || fetch(request)));
  } else if (request.mode === "navigate") {
    // The network's page when there is one (it names the newest build), else the cached one.
    event.respondWith(
      fetch(request)
        .then((response) => {
          if (response.ok) event.waitUntil(keepPage(response.clone()));
          return response;
        })
        .catch(() => caches.match(self.registration.scope)),
    );
  }
});
