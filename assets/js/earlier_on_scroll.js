() => {
  document.addEventListener('scroll', (e) => {
    const chat = document.getElementById('ac-chat');
    const btn = document.querySelector('#ac-earlier');
    if (!chat || !btn || btn.offsetParent === null || !chat.contains(e.target)) return;
    if (e.target.scrollTop <= 0 && Date.now() - (btn._asked || 0) > 1500) { btn._asked = Date.now(); btn.click(); }
  }, true);
  return [];
}
