() => {
  const GAP = 10;
  const place = () => {
    const chat = document.getElementById('ac-chat');
    const main = document.getElementById('ac-main');
    if (!chat || !main) return;
    let item = chat;
    while (item.parentElement && item.parentElement !== main) item = item.parentElement;
    let top = window.innerHeight;
    for (let el = item.nextElementSibling; el; el = el.nextElementSibling) {
      const r = el.getBoundingClientRect();
      if (r.height > 0 && r.width > 0 && r.top < top) top = r.top;
    }
    const bottom = Math.max(GAP, Math.round(window.innerHeight - top + GAP));
    document.documentElement.style.setProperty('--ac-toast-bottom', bottom + 'px');
  };
  let queued = false;
  const later = () => { if (!queued) { queued = true; requestAnimationFrame(() => { queued = false; place(); }); } };
  new MutationObserver(later).observe(document.body, {subtree: true, childList: true, attributes: true,
                                                      attributeFilter: ['class', 'style', 'hidden']});
  window.addEventListener('resize', later);
  place();
  return [];
}
