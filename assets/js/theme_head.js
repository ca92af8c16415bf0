(() => {
  const KEY = '__KEY__';
  const system = window.matchMedia('(prefers-color-scheme: dark)');
  // Gradio's own ?__theme=dark|light in the address wins for this page (trial 9: it was
  // ignored), until the switch is used; it is not remembered.
  let forced = new URLSearchParams(window.location.search).get('__theme');
  if (forced !== 'dark' && forced !== 'light') forced = null;
  const stored = () => { try { return localStorage.getItem(KEY) || 'system'; } catch (e) { return 'system'; } };
  const choice = () => forced || stored();
  const dark = () => { const c = choice(); return c === 'dark' || (c !== 'light' && system.matches); };
  const mark = () => {  // the switch's pressed button
    const c = choice();
    document.querySelectorAll('[data-ac-theme]').forEach((b) => {
      const pressed = String(b.dataset.acTheme === c);
      if (b.getAttribute('aria-pressed') !== pressed) b.setAttribute('aria-pressed', pressed);
    });
  };
  const apply = () => {
    const want = dark();
    document.documentElement.style.colorScheme = want ? 'dark' : 'light';  // scrollbars, form controls
    const body = document.body;
    if (body && body.classList.contains('dark') !== want) body.classList.toggle('dark', want);
    mark();
  };
  window.acTheme = {
    choice, dark, apply,
    set: (value) => {
      try { localStorage.setItem(KEY, value); } catch (e) {}
      if (forced) {  // the choice made now replaces the address's
        forced = null;
        const url = new URL(window.location.href);
        url.searchParams.delete('__theme');
        history.replaceState(history.state, '', url);
      }
      apply();
    },
  };
  const watch = () => {
    // Gradio sets the class on load and again when the system setting changes: put it right.
    new MutationObserver(apply).observe(document.body, {attributes: true, attributeFilter: ['class']});
    // The switch is drawn again in the page's language after load: mark its pressed button again.
    new MutationObserver(mark).observe(document.body, {childList: true, subtree: true});
    apply();
  };
  if (document.body) watch(); else document.addEventListener('DOMContentLoaded', watch);
  system.addEventListener('change', () => setTimeout(apply, 0));
  window.addEventListener('storage', (e) => { if (e.key === KEY && !forced) apply(); });  // another tab switched
})();
