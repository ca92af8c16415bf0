() => {
  // The top bar on one row (issue 31, item 5; webui/gui/topbar_menu.py). A bar too narrow for
  // everything folds its actions into the "⋯" menu, then the meter too: measured on every size
  // change of the bar, its actions or the meter (a longer label, another language).
  const TITLE_MIN = __TITLE_MIN__;
  const LEVELS = [[], ['ac-fold-actions'], ['ac-fold-actions', 'ac-fold-meter']];
  const bar = () => document.getElementById('ac-topbar');
  const more = () => document.getElementById('ac-more');
  const panel = () => document.getElementById('ac-actions');
  const field = () => document.querySelector('#ac-title input, #ac-title textarea');
  const isOpen = () => !!bar() && bar().classList.contains('ac-menu-open');
  const items = () => [...(panel() ? panel().querySelectorAll('button') : [])]
    .filter((b) => !b.disabled && b.offsetParent !== null);

  // The title's whole text in its title attribute (shown on hover), kept current: Gradio sets the
  // field's value property, so the field's own setter is wrapped.
  const syncTitle = () => {
    const t = field();
    if (!t) return;
    if (!t.__acTitled) {
      const proto = Object.getPrototypeOf(t);
      const d = Object.getOwnPropertyDescriptor(proto, 'value');
      if (d && d.set) {
        Object.defineProperty(t, 'value', {configurable: true, get() { return d.get.call(this); },
          set(v) { d.set.call(this, v); this.title = this.value; }});
        t.__acTitled = true;
      }
    }
    if (t.title !== t.value) t.title = t.value;
  };

  const fits = (b) => {
    const t = field();
    return b.scrollWidth <= b.clientWidth + 1 && (!t || t.getBoundingClientRect().width >= TITLE_MIN);
  };
  let lastWidth = -1;
  const measure = () => {
    const b = bar();
    if (!b || !b.offsetParent) return;
    if (isOpen()) {  // an open menu stays put (measuring would hide the item in focus) unless the bar resized
      if (b.clientWidth === lastWidth) return;
      setOpen(false);
    }
    lastWidth = b.clientWidth;
    const all = LEVELS[LEVELS.length - 1];
    let level = 0;
    for (; level < LEVELS.length; level++) {
      b.classList.remove(...all);
      b.classList.add(...LEVELS[level]);
      if (fits(b)) break;
    }
    if (level >= LEVELS.length) level = LEVELS.length - 1;  // the most folded (the title shrinks)
    b.classList.remove(...all);
    b.classList.add(...LEVELS[level]);
    b.dataset.acFold = String(level);
    syncTitle();
  };
  let queued = false;
  const later = () => { if (!queued) { queued = true; requestAnimationFrame(() => { queued = false; measure(); }); } };

  const setOpen = (open, focusFirst) => {
    const b = bar(), m = more();
    if (!b) return;
    b.classList.toggle('ac-menu-open', open);
    if (m) m.setAttribute('aria-expanded', String(open));
    if (open && focusFirst) { const first = items()[0]; if (first) first.focus(); }
  };
  const closeToButton = () => { setOpen(false); if (more()) more().focus(); };

  document.addEventListener('click', (e) => {
    const t = e.target;
    if (!t || !t.closest) return;
    if (t.closest('#ac-more')) { setOpen(!isOpen(), e.detail === 0); return; }  // detail 0: Enter/Space
    if (!isOpen()) return;
    if (t.closest('#ac-actions button')) { setTimeout(() => setOpen(false), 0); return; }  // after its own click
    // a person's click elsewhere closes it (not the page's own clicks on hidden buttons: the live
    // check clicks one every second)
    if (e.isTrusted && !t.closest('#ac-actions')) setOpen(false);
  }, true);
  document.addEventListener('keydown', (e) => {
    if (!isOpen()) return;
    if (e.key === 'Escape') { e.preventDefault(); e.stopPropagation(); closeToButton(); return; }
    if (e.key === 'ArrowDown' || e.key === 'ArrowUp') {
      const list = items();
      if (!list.length) return;
      const at = list.indexOf(document.activeElement);
      const next = e.key === 'ArrowDown' ? (at + 1) % list.length : (at <= 0 ? list.length - 1 : at - 1);
      e.preventDefault();
      list[next].focus();
    }
  }, true);
  document.addEventListener('focusin', (e) => {  // Tab out of the menu closes it
    if (isOpen() && e.target.closest && !e.target.closest('#ac-actions, #ac-more')) setOpen(false);
  }, true);
  document.addEventListener('mouseover', (e) => {
    if (e.target.closest && e.target.closest('#ac-title')) syncTitle();
  }, true);
  document.addEventListener('input', (e) => {
    if (e.target.closest && e.target.closest('#ac-title')) syncTitle();
  }, true);

  const started = Date.now();
  const init = () => {
    const b = bar();
    if (!b || !panel() || !more()) { if (Date.now() - started < 10000) setTimeout(init, 50); return; }
    const m = more();
    const name = m.querySelector('.ac-sr');
    if (name && !m.title) m.title = name.textContent.trim();
    const watch = new ResizeObserver(later);
    for (const el of [b, panel(), document.getElementById('ac-meter-box')]) if (el) watch.observe(el);
    // the "⋯" markup is redrawn when the page's language is set: its title follows
    new MutationObserver(() => {
      const mm = more(), n = mm && mm.querySelector('.ac-sr');
      if (mm && n) { mm.title = n.textContent.trim(); mm.setAttribute('aria-expanded', String(isOpen())); }
    }).observe(document.getElementById('ac-more-box'), {childList: true, subtree: true, characterData: true});
    measure();
  };
  init();
  return [];
}
